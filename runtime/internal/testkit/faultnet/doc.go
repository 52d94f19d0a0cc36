// Package faultnet gives tests hosts on a network whose faults they
// control, without netem, tc or iptables: a [Hub] creates each host as a
// network namespace with a TUN device (10.77.0.x/24, lo up), holds every
// TUN's file descriptor in the test process and forwards IP packets
// between the hosts by destination address, applying per-direction
// [Rule]s (loss, delay with jitter, reordering, dropping everything) that
// tests change while traffic flows. [Hub.Start] runs a process inside a
// host. It is for tests only.
//
// Everything a Hub makes (namespaces, TUN devices, processes) it removes
// in [Hub.Close], which [New] registers with t.Cleanup, so also when the
// test fails; a SIGINT or SIGTERM of the test process closes every open
// Hub before the process dies; and namespaces left behind by a process
// that was killed outright (their names carry its pid) are removed by the
// next [New]. It never touches the host's own interfaces: the TUN devices
// and addresses exist only inside the namespaces it created.
//
// A Hub needs root, /dev/net/tun and the ip command (iproute2); without
// them [New] skips the test through need.Skipf, saying what is missing.
package faultnet
