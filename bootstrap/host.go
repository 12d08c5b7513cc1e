package bootstrap

import (
	"os"
	"strings"
)

// HostID names the machine this process runs on, as far as transports are
// concerned: ranks with the same HostID can share memory. It is
// GOCOLL_HOST when the launcher sets it (gocollrun does, one value per
// --host entry), otherwise the hostname plus the network namespace, so that
// hosts emulated with network namespaces count as different hosts.
func HostID() string {
	if h := os.Getenv("GOCOLL_HOST"); h != "" {
		return h
	}
	name, _ := os.Hostname()
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return name
	}
	return name + "/" + strings.Trim(strings.TrimPrefix(ns, "net:"), "[]")
}
