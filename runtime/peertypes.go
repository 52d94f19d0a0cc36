package runtime

import (
	"context"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// WithPeerTypes makes a node learn the protobuf message types of its
// peers' typed patterns that its own binary does not link: when a peer's
// catalog names such a type, the node pulls the peer's schema
// ([introspect.DescribePattern]) once per catalog digest, so that the answers of
// that peer decode into maps and JSON ([Result.Decode] into a map,
// json.RawMessage or *any; [Result.Value] gives a dynamic message). A
// gateway or a tool that forwards calls as JSON wants it; a service that
// links the types it calls does not. The types a peer states are used
// only for types this binary does not register; the first peer to state
// a type name is believed (at most maxPeerTypes are kept).
func WithPeerTypes() Option {
	return nodeOption(func(c *nodeConfig) { c.peerTypes = true })
}

// maxPeerTypes bounds the message types a node learns from its peers.
const maxPeerTypes = 16384

// peerTypes are the message types a node learnt from its peers.
type peerTypes struct {
	mu      sync.Mutex
	types   protoregistry.Types
	digests map[string]bool // catalog digests whose schemas were loaded
}

func newPeerTypes(on bool) *peerTypes {
	if !on {
		return nil
	}
	return &peerTypes{digests: map[string]bool{}}
}

// find returns the type named name: this binary's, else a peer's.
func (t *peerTypes) find(name protoreflect.FullName) (protoreflect.MessageType, error) {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(name); err == nil {
		return mt, nil
	}
	if t == nil {
		return nil, protoregistry.NotFound
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.types.FindMessageByName(name)
}

// known reports whether every type of types is this binary's or learnt.
func (t *peerTypes) known(types catalogTypes) bool {
	for _, tn := range types {
		for _, name := range [2]string{tn.in, tn.out} {
			if _, err := t.find(protoreflect.FullName(name)); err != nil {
				return false
			}
		}
	}
	return true
}

// learn pulls the schema of the peer at the other end of c, whose
// catalog, of digest d, names types, when some of them are unknown here,
// and keeps the messages it declares.
func (n *Node) learnTypes(ctx context.Context, c Conn, d string, types catalogTypes) error {
	t := n.peerTypes
	if t == nil || len(types) == 0 {
		return nil
	}
	t.mu.Lock()
	done := t.digests[d]
	t.mu.Unlock()
	if done || t.known(types) {
		return nil
	}
	s, err := describeConn(ctx, c, nil)
	if err != nil {
		return err
	}
	files, err := s.Registry()
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		t.add(fd.Messages())
		return true
	})
	if len(t.digests) >= maxCachedCatalogs {
		clear(t.digests)
	}
	t.digests[d] = true
	return nil
}

// add keeps the messages of ms and their nested messages that neither
// this binary nor an earlier peer has. Callers hold t.mu.
func (t *peerTypes) add(ms protoreflect.MessageDescriptors) {
	for i := range ms.Len() {
		md := ms.Get(i)
		if md.IsMapEntry() {
			continue
		}
		if _, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName()); err != nil && t.types.NumMessages() < maxPeerTypes {
			if _, err := t.types.FindMessageByName(md.FullName()); err != nil {
				_ = t.types.RegisterMessage(dynamicpb.NewMessageType(md))
			}
		}
		t.add(md.Messages())
	}
}
