package algorithms

import "testing"

// The algorithms that are not schedules say which calls they take: shm
// host memory on one host, the device group's CUDA memory where every
// rank maps the others', hoststaged CUDA memory on one host; every other
// call gets an error naming the restriction.
func TestNonScheduleRestrictions(t *testing.T) {
	type where struct{ shared, device, group bool }
	var all []where
	for _, s := range []bool{false, true} {
		for _, d := range []bool{false, true} {
			for _, g := range []bool{false, true} {
				if g && !(d && s) {
					continue // a device group is CUDA memory on one host
				}
				all = append(all, where{s, d, g})
			}
		}
	}
	for _, c := range Collectives {
		for _, a := range All(c) {
			if a.IsSchedule() {
				continue
			}
			for _, w := range all {
				p := Params{P: 4, Count: 8, Counts: []int{2, 2, 2, 2}, Commutative: true,
					SharedMemory: w.shared, DeviceMemory: w.device, DeviceGroup: w.group}
				var want bool
				switch {
				case a.Direct:
					want = w.shared && !w.device
				case a.Device:
					want = w.group
				case a.HostStaged:
					want = w.device && w.shared
				}
				if err := a.Check(p); (err == nil) != want {
					t.Errorf("%s/%s with %+v: Check says %v, want it to run: %v", c, a.Name, w, err, want)
				}
				if a.Placed(p) != want {
					t.Errorf("%s/%s with %+v: Placed says %v, want %v", c, a.Name, w, a.Placed(p), want)
				}
			}
		}
	}
}
