package bridge

import "github.com/wizardmesh/wizard/runtime/internal/mux"

// Lost is the error of a call whose request was sent (or may have been)
// when its connection failed, for a transport that does not run on mux
// (a broker's): it reads "<where>: connection lost after the call was
// sent: <err>" and matches err but not [runtime.ErrNotSent], so that only
// calls that may run again are refed.
func Lost(where string, err error) error {
	return &connError{where: where, why: mux.Detail(err), err: err}
}
