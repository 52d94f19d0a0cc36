package microwizard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// lineHead is what is kept of a line over the bound: enough for the
// fields MicroWizard and Seneca write before the message (id, k or kind,
// sync, origin), to answer the call it carried.
const lineHead = 4 << 10

// errLineTooLong matches every [*lineTooLongError].
var errLineTooLong = errors.New("line longer than the bound")

// lineTooLongError is a line over the bound, read to its end and
// dropped: the connection goes on.
type lineTooLongError struct{ size, max int }

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("a line of %d bytes, longer than the line bound of %d bytes (WithMaxLine)", e.size, e.max)
}

func (e *lineTooLongError) Is(target error) bool { return target == errLineTooLong }

// headLine reads the fields of the line whose head is b that come before
// the first value cut off (or malformed): a request's or an answer's id,
// kind and sync, a Seneca line's origin and track.
func headLine(b []byte) line {
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return l
	}
	for {
		t, err := dec.Token()
		k, ok := t.(string)
		if err != nil || !ok {
			return l
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return l
		}
		switch strings.ToLower(k) { // as encoding/json matches a field
		case "id":
			json.Unmarshal(v, &l.ID)
		case "k":
			json.Unmarshal(v, &l.K)
		case "kind":
			json.Unmarshal(v, &l.Kind)
		case "sync":
			json.Unmarshal(v, &l.Sync)
		case "origin":
			json.Unmarshal(v, &l.Origin)
		case "track":
			json.Unmarshal(v, &l.Track)
		}
	}
}
