package runtime

import (
	"context"
	"io"
	"sync"
)

// localStream is an in-process stream: the caller and the handler hand
// each other their messages as they are, nothing encoded, through two
// queues of streamQueue messages.
type localStream struct {
	ctx  context.Context // the caller's side: the open's ctx, cancelled by cancel
	stop context.CancelFunc
	hctx context.Context // the handler's: ctx's, ended by the node's shutdown too

	up   chan any      // caller → handler; closed by CloseSend
	down chan any      // handler → caller
	hdr  chan struct{} // closed when the headers are sent
	done chan struct{} // closed when the handler has returned

	mu         sync.Mutex
	sendClosed bool
	hdrSent    bool
	hdrMD      Metadata
	trlMD      Metadata
	end        error // the handler's result, set before done closes
}

// The caller's side.

func (s *localStream) send(msg any) error {
	s.mu.Lock()
	closed := s.sendClosed
	s.mu.Unlock()
	if closed {
		return errSendAfterClose
	}
	select {
	case <-s.done:
		return io.EOF // ended: Recv tells how
	default:
	}
	select {
	case s.up <- msg:
		return nil
	case <-s.done:
		return io.EOF
	case <-s.ctx.Done():
		return toError(s.ctx.Err())
	}
}

func (s *localStream) closeSend() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sendClosed {
		s.sendClosed = true
		close(s.up)
	}
	return nil
}

func (s *localStream) recv() (streamMsg, error) {
	select {
	case v := <-s.down:
		return streamMsg{v: v}, nil
	default:
	}
	select {
	case v := <-s.down:
		return streamMsg{v: v}, nil
	case <-s.done:
		select {
		case v := <-s.down: // sent before the handler returned
			return streamMsg{v: v}, nil
		default:
		}
		return streamMsg{}, streamEnd(s.end)
	case <-s.ctx.Done():
		return streamMsg{}, toError(s.ctx.Err())
	}
}

func (s *localStream) header() (Metadata, error) {
	select {
	case <-s.hdr:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.hdrMD, nil
	case <-s.done:
		select {
		case <-s.hdr:
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.hdrMD, nil
		default:
		}
		if err := streamEnd(s.end); err != io.EOF {
			return Metadata{}, err
		}
		return Metadata{}, nil
	case <-s.ctx.Done():
		return Metadata{}, toError(s.ctx.Err())
	}
}

func (s *localStream) trailer() Metadata {
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.trlMD
	default:
		return Metadata{}
	}
}

func (s *localStream) cancel() { s.stop() }

// The handler's side.

type localServer struct{ *localStream }

func (s localServer) recv() (any, error) {
	select {
	case v, ok := <-s.up:
		if !ok {
			return nil, io.EOF
		}
		return v, nil
	case <-s.hctx.Done():
		return nil, toError(s.hctx.Err())
	}
}

func (s localServer) send(msg any) error {
	s.mu.Lock()
	if !s.hdrSent {
		s.hdrSent = true
		close(s.hdr)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return errSendEnded
	default:
	}
	select {
	case s.down <- msg:
		return nil
	case <-s.hctx.Done():
		return toError(s.hctx.Err())
	}
}

func (s localServer) sendHeader(ps []MetaPair) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hdrSent {
		return errHeaderSent
	}
	s.hdrSent, s.hdrMD = true, Metadata{pairs: ps}
	close(s.hdr)
	return nil
}

func (s localServer) setTrailer(ps []MetaPair) {
	s.mu.Lock()
	s.trlMD = Metadata{pairs: ps}
	s.mu.Unlock()
}

// finish records the handler's result and ends the stream.
func (s localServer) finish(err error) {
	s.mu.Lock()
	s.end = err
	s.mu.Unlock()
	close(s.done)
}

var (
	errSendAfterClose = Errorf(CodeFailedPrecondition, "wizard: Send on a stream after CloseSend")
	errSendEnded      = Errorf(CodeFailedPrecondition, "wizard: Send on a stream whose handler has returned")
	errHeaderSent     = Errorf(CodeFailedPrecondition, "wizard: the stream's headers are already sent (SendHeader once, before the first Send)")
)
