package coll

import (
	"reflect"
	"testing"

	"github.com/gocoll/gocoll/algorithms"
)

// Every field of algorithms.Params shapes the schedule, so the schedule
// cache must key on each (P and Rank are fixed per communicator). A new
// field must be added to cacheKey too; this test is the reminder.
func TestCacheKeyCoversParams(t *testing.T) {
	covered := map[string]bool{"P": true, "Rank": true, "Root": true, "Count": true, "Counts": true, "Commutative": true, "InPlace": true, "Reproducible": true,
		"SharedMemory": true, // only decides whether shm may run; no schedule depends on it
		"DeviceMemory": true, // likewise: the device executor runs the same schedules
		"DeviceGroup":  true, // only decides whether the device algorithms may run
		"Nodes":        true} // fixed per communicator, as P and Rank (SetNodes empties the cache)
	typ := reflect.TypeOf(algorithms.Params{})
	for i := range typ.NumField() {
		if !covered[typ.Field(i).Name] {
			t.Errorf("algorithms.Params.%s is not part of the schedule cache key", typ.Field(i).Name)
		}
	}
}
