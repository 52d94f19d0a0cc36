package harness

import (
	"context"

	"github.com/wizardmesh/wizard/runtime"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// wizardStreamPattern is the pattern of the wizard contenders' stream,
// served beside wizardPattern (whose route [dialWizard] waits for).
const wizardStreamPattern = "cmd:stream,role:bench"

// wizardMessages is the typed server stream: the request carries the
// message size, each message a payload, the gRPC contender's messages.
type wizardMessages = runtime.ServerStream[*wrapperspb.UInt64Value, *wrapperspb.BytesValue]

// wizardStreamer is a wizard node on the transport newTransport returns,
// serving the stream through runtime.NewStreamHandler and opening it
// through the typed client's Stream, as generated code does.
func wizardStreamer(name, title, note string, newTransport func() (runtime.Transport, error)) streamer {
	return streamer{
		name:  name,
		title: title,
		note:  note,
		idle:  true,
		serve: func(listen string, src *streamSource) (Server, error) {
			t, err := newTransport()
			if err != nil {
				return nil, err
			}
			node, err := runtime.New(runtime.WithTransport(t), runtime.WithListen(listen))
			if err != nil {
				return nil, err
			}
			h := runtime.NewStreamHandler(func(ctx context.Context, s *wizardMessages) error {
				req, err := s.Recv()
				if err != nil {
					return err
				}
				// A new message per send, as a handler builds them; Send
				// has encoded it when it returns.
				return serveMessages(src, ctx, int(req.GetValue()), s, func(s *wizardMessages, p []byte) error {
					return s.Send(&wrapperspb.BytesValue{Value: p})
				})
			})
			if err := node.Add(wizardStreamPattern, h); err != nil {
				node.Close()
				return nil, err
			}
			return wizardServer{node}, nil
		},
		dial: func(ctx context.Context, addr string) (StreamClient, error) {
			node, err := dialWizardNode(ctx, title, newTransport, []string{addr}, wizardStreamPattern)
			if err != nil {
				return nil, err
			}
			c, err := runtime.NewClient[wrapperspb.UInt64Value, wrapperspb.BytesValue](node, wizardStreamPattern)
			if err != nil {
				node.Close()
				return nil, err
			}
			return &wizardStreamClient{node: node, c: c}, nil
		},
	}
}

type wizardStreamClient struct {
	node *runtime.Node
	c    *runtime.Client[wrapperspb.UInt64Value, wrapperspb.BytesValue]
}

func (c *wizardStreamClient) Start(ctx context.Context, n, size int, got func(int, []byte) error) (StreamRun, error) {
	return startEach(ctx, n, size, got, func(ctx context.Context, size int) (recvStream, error) {
		s, err := c.c.Stream(ctx)
		if err != nil {
			return nil, err
		}
		err = s.Send(&wrapperspb.UInt64Value{Value: uint64(size)})
		if err == nil {
			err = s.CloseSend()
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		return wizardRecv{s}, nil
	})
}

func (c *wizardStreamClient) Close() error { return c.node.Close() }

type wizardRecv struct {
	s *runtime.ClientStream[*wrapperspb.UInt64Value, *wrapperspb.BytesValue]
}

func (r wizardRecv) Recv() ([]byte, error) {
	m, err := r.s.Recv()
	if err != nil {
		return nil, err
	}
	return m.GetValue(), nil
}

func (r wizardRecv) Close() { r.s.Close() }
