package microwizard

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// A failed reply's payload carries the error's details, each a
// uvarint-length-prefixed google.protobuf.Any (see runtime.Message).

// encodeDetails encodes ds as a failed reply's payload.
func encodeDetails(ds ...proto.Message) []byte {
	var b []byte
	for _, d := range ds {
		a, err := anypb.New(d)
		if err != nil {
			continue
		}
		ab, err := proto.Marshal(a)
		if err != nil {
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(ab)))
		b = append(b, ab...)
	}
	return b
}

// decodeDetails decodes a failed reply's payload; details of types not
// linked in are skipped, malformed input ends the list.
func decodeDetails(b []byte) []proto.Message {
	var ds []proto.Message
	for len(b) > 0 {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			break
		}
		a := new(anypb.Any)
		if proto.Unmarshal(b[n:n+int(l)], a) != nil {
			break
		}
		b = b[n+int(l):]
		if m, err := a.UnmarshalNew(); err == nil {
			ds = append(ds, m)
		}
	}
	return ds
}
