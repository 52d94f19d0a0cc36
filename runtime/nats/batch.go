package nats

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// A batch is a NATS message whose data is several frames one after
// another, each length field first, as a single-frame message is one: a
// single-frame message is a batch of one. In a batch the frames name
// their calls by id, not by the message's reply subject: a caller's
// requests to one node that queue while it publishes travel in one
// message, with the caller's batch subject (<inbox>.0) as reply, and a
// node's replies to one caller that queue while it publishes travel in
// one message to that subject, each frame with the id of its call. The
// broker pays per message, so under concurrency a call costs it a
// fraction of a message each way.
//
// A frame with id 0 is a call of the single-frame form, named by the
// message's reply subject and answered by a message of its own to it:
// callers that do not batch (older ones) send those, and a caller
// batches only to a node whose pong says it reads batches (its id is
// batchVersion), so that a node never sees a batch it cannot read.

// batchVersion is the id of a pong from a node that reads batches.
const batchVersion = 1

// batchToken is the last token of a caller's batch subject: calls are
// numbered from 1, so no call's own reply subject ends with it.
const batchToken = "0"

// The bounds of a batch: frames, and bytes (or the broker's max_payload,
// whichever is smaller). A frame larger than the byte bound travels
// alone.
const (
	maxBatchFrames = 64
	maxBatchBytes  = 64 << 10
)

// maxBatchRounds is how many messages a caller publishing for the others
// sends before a goroutine takes over, so that its own call is not held
// up for long.
const maxBatchRounds = 4

// errBatchFrames is the reason of a message with more frames than a
// batch may hold.
var errBatchFrames = fmt.Errorf("wizard: nats: more than %d frames in a message", maxBatchFrames)

// nextFrame decodes the first frame of data, a message's data or what is
// left of it, into f and returns what follows it. A frame over max bytes
// is rejected before it is decoded; f aliases data.
func nextFrame(data []byte, max int, f *wire.Frame) ([]byte, error) {
	if len(data) < 4 {
		return nil, errLength
	}
	n := uint64(binary.BigEndian.Uint32(data))
	if n > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", wire.ErrFrameTooLarge, n, max)
	}
	if n > uint64(len(data)-4) {
		return nil, errLength
	}
	if err := wire.DecodeFrame(data[4:4+n], f); err != nil {
		return nil, err
	}
	return data[4+n:], nil
}

// checkBatch reports whether data is a well-formed batch: at least one
// frame, at most maxBatchFrames, each well-formed and at most max bytes,
// and nothing after the last one. A node checks a whole message of
// several frames before it acts on any of them, so that a malformed one
// is dropped whole; a message of one frame is left to its decoding (it
// is checked as it is decoded).
func checkBatch(data []byte, max int) error {
	if len(data) == 0 || len(data) >= 4 && uint64(binary.BigEndian.Uint32(data)) == uint64(len(data)-4) {
		if len(data)-4 > max {
			return fmt.Errorf("%w: %d bytes, limit %d", wire.ErrFrameTooLarge, len(data)-4, max)
		}
		if len(data) == 0 {
			return errLength
		}
		return nil
	}
	var meta [4]wire.Meta
	f := wire.Frame{Meta: meta[:0]}
	for n := 0; len(data) > 0; n++ {
		if n == maxBatchFrames {
			return errBatchFrames
		}
		var err error
		if data, err = nextFrame(data, max, &f); err != nil {
			return err
		}
	}
	return nil
}

// batcher publishes frames to one subject, coalescing those that queue
// while it publishes: a frame sent while no publish is in progress goes
// at once, in a message of its own, by the goroutine that sends it; the
// frames sent meanwhile queue, and that goroutine publishes them, in
// order, in as few messages as the bounds allow, before it returns.
type batcher struct {
	nc      *natsgo.Conn
	subject string
	reply   string        // the messages' reply subject; "" for none
	limit   *atomic.Int64 // the bytes in a message; nil: maxBatchBytes
	// failed, when set, is told the ids of the calls in a message that
	// could not be published.
	failed func(ids []uint64, err error)
	onErr  func(err error) // when set, told of a message not published
	// active counts the calls that will send a frame soon, or are
	// sending one: a caller's calls in flight, a node's calls being
	// served for a caller. While others than the publisher's own are
	// active, the publisher yields before it takes the queue as empty,
	// so that the frames of the goroutines ready to run join the next
	// message.
	active atomic.Int32

	mu    sync.Mutex
	busy  bool     // a goroutine is publishing
	queue []*batch // to publish, in order; frames go to the last one
}

// batch is a message being filled.
type batch struct {
	data   []byte
	ids    []uint64 // the calls whose requests it holds
	frames int
}

// send publishes f, at once or in the next message. A call's request
// passes its id, so that it is told when its message cannot be
// published; others pass 0.
func (w *batcher) send(f *wire.Frame, id uint64) {
	size := f.Size()
	limit := maxBatchBytes
	if w.limit != nil {
		limit = int(w.limit.Load())
	}
	w.mu.Lock()
	var b *batch
	if n := len(w.queue); n > 0 && w.queue[n-1].frames < maxBatchFrames && len(w.queue[n-1].data)+size <= limit {
		b = w.queue[n-1]
	} else {
		b = getBatch()
		w.queue = append(w.queue, b)
	}
	b.data = wire.AppendFrame(b.data, f)
	b.frames++
	if id != 0 {
		b.ids = append(b.ids, id)
	}
	if w.busy {
		w.mu.Unlock()
		return
	}
	w.busy = true
	w.drain(maxBatchRounds)
}

// drain publishes the queue, w.mu held and w.busy set by the caller; it
// returns with w.mu released. After rounds messages, a goroutine of its
// own publishes the rest.
func (w *batcher) drain(rounds int) {
	for r, yields := 0, 0; ; r++ {
		if len(w.queue) == 0 {
			if yields == maxBatchRounds || w.active.Load() <= 1 {
				break
			}
			yields++
			w.mu.Unlock()
			runtime.Gosched()
			w.mu.Lock()
			if len(w.queue) == 0 {
				break
			}
		}
		if r == rounds {
			w.mu.Unlock()
			go func() {
				w.mu.Lock()
				w.drain(-1)
			}()
			return
		}
		b := w.queue[0]
		n := copy(w.queue, w.queue[1:])
		w.queue[n] = nil
		w.queue = w.queue[:n]
		w.mu.Unlock()
		w.publish(b)
		w.mu.Lock()
	}
	w.busy = false
	w.mu.Unlock()
}

// publish publishes b and frees it.
func (w *batcher) publish(b *batch) {
	var err error
	if w.reply != "" {
		err = w.nc.PublishRequest(w.subject, w.reply, b.data)
	} else {
		err = w.nc.Publish(w.subject, b.data)
	}
	if err != nil {
		if w.failed != nil && len(b.ids) > 0 {
			w.failed(b.ids, err)
		}
		if w.onErr != nil {
			w.onErr(err)
		}
	}
	putBatch(b)
}

// idle reports whether w publishes nothing and has nothing queued.
func (w *batcher) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.busy && len(w.queue) == 0
}

// notSentError marks an answer of a call whose request could not be
// published.
type notSentError struct{ reason error }

func (e notSentError) Error() string { return e.reason.Error() }
func (e notSentError) Unwrap() error { return e.reason }
