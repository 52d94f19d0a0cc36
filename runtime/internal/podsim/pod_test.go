//go:build linux

package podsim_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/wizardmesh/wizard/examples/services/mesh"
	"github.com/wizardmesh/wizard/runtime"
)

// The patterns the server pods serve: once is not idempotent (each key
// must run once), idem is and is called with runtime.Idempotent.
const (
	oncePattern = "role:podsim,cmd:once"
	idemPattern = "role:podsim,cmd:idem"
)

// Environment of a server pod besides roleEnv: its name, and the
// directory it appends its executions to.
const (
	podNameEnv = "WIZARD_PODSIM_POD"
	podDirEnv  = "WIZARD_PODSIM_DIR"
)

// runPod is a server pod: the example services' main (mesh.Serve), its
// flags on the command line, serving the two patterns. once appends
// each key it runs to exec-<pod>.log as it goes.
func runPod() error {
	name, dir := os.Getenv(podNameEnv), os.Getenv(podDirEnv)
	log, err := os.OpenFile(filepath.Join(dir, "exec-"+name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	reply := map[string]any{"by": name}
	return mesh.Serve(name, "", func(n *runtime.Node) error {
		return errors.Join(
			n.Add(oncePattern, func(ctx context.Context, r runtime.Request) (any, error) {
				key, _ := r.Get("key").(string)
				if _, err := log.WriteString(key + "\n"); err != nil {
					return nil, err
				}
				return reply, nil
			}),
			n.Add(idemPattern, func(ctx context.Context, r runtime.Request) (any, error) {
				return reply, nil
			}),
		)
	})
}
