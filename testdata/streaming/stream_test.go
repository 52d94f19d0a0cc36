// This test is not built in place (the go tool skips testdata): the
// protoc-gen-wizard test TestCompileAndRoundTrip copies it into a temporary
// module beside the stubs generated from input.proto and runs it there.

package streaming_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	streaming "example.com/golden/streaming"
	"github.com/wizardmesh/wizard/runtime"
	"github.com/wizardmesh/wizard/runtime/tcp"
)

type feed struct {
	streaming.UnimplementedFeedServiceHandler
}

func (feed) Post(_ context.Context, ev *streaming.Event) (*streaming.PostResponse, error) {
	return &streaming.PostResponse{Seq: ev.GetSeq() + 1}, nil
}

func (feed) Watch(ctx context.Context, req *streaming.WatchRequest, s *runtime.ServerStream[*streaming.WatchRequest, *streaming.Event]) error {
	for i := range req.GetCount() {
		if err := s.Send(&streaming.Event{Topic: req.GetTopic(), Seq: int64(i)}); err != nil {
			return err
		}
	}
	return nil
}

func (feed) Upload(ctx context.Context, s *runtime.ServerStream[*streaming.Event, *streaming.UploadResponse]) error {
	var n int64
	for {
		_, err := s.Recv()
		if err == io.EOF {
			return s.Send(&streaming.UploadResponse{Count: n})
		}
		if err != nil {
			return err
		}
		n++
	}
}

func (feed) Chat(ctx context.Context, s *runtime.ServerStream[*streaming.Event, *streaming.Event]) error {
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&streaming.Event{Topic: ev.GetTopic(), Text: "re: " + ev.GetText(), Seq: ev.GetSeq()}); err != nil {
			return err
		}
	}
}

func newNode(t *testing.T, opts ...runtime.Option) *runtime.Node {
	t.Helper()
	n, err := runtime.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// serve adds the feed and an unimplemented tick service to n.
func serve(t *testing.T, n *runtime.Node) {
	t.Helper()
	if err := streaming.RegisterFeedServiceHandler(n, feed{}); err != nil {
		t.Fatal(err)
	}
	if err := streaming.RegisterTickServiceHandler(n, streaming.UnimplementedTickServiceHandler{}); err != nil {
		t.Fatal(err)
	}
}

// TestStreams calls every method of the streaming case's stubs, in-process
// and over TCP.
func TestStreams(t *testing.T) {
	callers := map[string]func(t *testing.T) *runtime.Node{
		"in-process": func(t *testing.T) *runtime.Node {
			n := newNode(t)
			serve(t, n)
			return n
		},
		"tcp": func(t *testing.T) *runtime.Node {
			tr, err := tcp.New()
			if err != nil {
				t.Fatal(err)
			}
			server := newNode(t, runtime.WithTransport(tr), runtime.WithListen("127.0.0.1:0"))
			serve(t, server)
			caller := newNode(t, runtime.WithTransport(tr), runtime.WithDiscovery(runtime.StaticPeers(server.Addr())))
			for _, p := range []string{streaming.FeedServicePostPattern, streaming.FeedServiceWatchPattern, streaming.FeedServiceUploadPattern, streaming.FeedServiceChatPattern, streaming.TickServiceTicksPattern} {
				if err := caller.WaitFor(t.Context(), p); err != nil {
					t.Fatal(err)
				}
			}
			return caller
		},
	}
	for name, newCaller := range callers {
		t.Run(name, func(t *testing.T) {
			n := newCaller(t)
			ctx := t.Context()
			feed, err := streaming.NewFeedServiceClient(n)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := feed.Post(ctx, &streaming.Event{Seq: 41}); err != nil || res.GetSeq() != 42 {
				t.Errorf("Post = %v, %v", res, err)
			}

			watch, err := feed.Watch(ctx, &streaming.WatchRequest{Topic: "news", Count: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer watch.Close()
			var got []string
			for {
				ev, err := watch.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s/%d", ev.GetTopic(), ev.GetSeq()))
			}
			if fmt.Sprint(got) != "[news/0 news/1 news/2]" {
				t.Errorf("Watch sent %v", got)
			}

			upload, err := feed.Upload(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer upload.Close()
			for range 4 {
				if err := upload.Send(&streaming.Event{Text: "x"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := upload.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if res, err := upload.Recv(); err != nil || res.GetCount() != 4 {
				t.Errorf("Upload = %v, %v; want count 4", res, err)
			}

			chat, err := feed.Chat(ctx) //lint:ignore SA1019 the case's method is deprecated
			if err != nil {
				t.Fatal(err)
			}
			defer chat.Close()
			if err := chat.Send(&streaming.Event{Text: "hi"}); err != nil {
				t.Fatal(err)
			}
			if ev, err := chat.Recv(); err != nil || ev.GetText() != "re: hi" {
				t.Errorf("Chat = %v, %v", ev, err)
			}
			if err := chat.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if ev, err := chat.Recv(); err != io.EOF {
				t.Errorf("Chat after CloseSend = %v, %v; want io.EOF", ev, err)
			}

			tick, err := streaming.NewTickServiceClient(n)
			if err != nil {
				t.Fatal(err)
			}
			ticks, err := tick.Ticks(ctx, &streaming.WatchRequest{})
			if err != nil {
				t.Fatal(err)
			}
			defer ticks.Close()
			if ev, err := ticks.Recv(); !errors.Is(err, runtime.ErrUnimplemented) {
				t.Errorf("Ticks = %v, %v; want unimplemented", ev, err)
			}
		})
	}
}
