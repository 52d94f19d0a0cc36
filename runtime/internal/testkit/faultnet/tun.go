//go:build linux

package faultnet

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// openTUN creates the TUN device dev (IFF_TUN|IFF_NO_PI: bare IP
// packets) inside the namespace ns and returns its file, opened
// non-blocking so that reads go through the poller and Close ends them.
func openTUN(ns, dev string) (*os.File, error) {
	var f *os.File
	err := inNamespace(ns, func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		if err := setIff(fd, dev); err != nil {
			unix.Close(fd)
			return err
		}
		f = os.NewFile(uintptr(fd), "/dev/net/tun:"+ns+"/"+dev)
		return nil
	})
	return f, err
}

// inNamespace runs fn on an OS thread inside the network namespace ns:
// what fn creates there (a TUN device, a socket) stays in ns. It enters
// ns on a locked thread and comes back; a thread that cannot come back
// is left locked, so the runtime ends it.
func inNamespace(ns string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err, back := inNamespaceLocked(ns, fn)
		if back {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

// inNamespaceLocked is inNamespace on the locked thread; back reports
// whether the thread is in its original namespace again.
func inNamespaceLocked(ns string, fn func() error) (err error, back bool) {
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open own namespace: %w", err), true
	}
	defer unix.Close(orig)
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open namespace: %w", err), true
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", ns, err), true
	}
	err = fn()
	if berr := unix.Setns(orig, unix.CLONE_NEWNET); berr != nil {
		return fmt.Errorf("setns back: %w", berr), false
	}
	return err, true
}

// Do runs fn inside host's namespace, on a thread of its own: sockets fn
// opens (net.Listen, net.Dial) belong to the host and stay there, so a
// test can talk through the hub without a process of its own.
func (h *Hub) Do(host *Host, fn func() error) error { return inNamespace(host.Name, fn) }

// setIff makes fd the TUN device dev.
func setIff(fd int, dev string) error {
	ifr, err := unix.NewIfreq(dev)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return fmt.Errorf("TUNSETIFF %s: %w", dev, err)
	}
	return nil
}
