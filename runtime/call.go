package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// outMessage is a Message with room for the metadata the node itself
// sends (caller, payload type, pattern pairs), so that both take one
// allocation.
type outMessage struct {
	Message
	meta [4]MetaPair
	id   [8]byte // the call id's bytes, which a meta value points into
}

const (
	metaCall   = "i" // the call's id among the caller's calls, 8 bytes big-endian
	metaCaller = "c" // the calling node's id
	metaType   = "t" // the protobuf full name of a CodecProto payload
	metaOver   = "o" // Act with a protobuf message: the pattern Request.Get sees
)

func metaValue(meta []MetaPair, key string) string {
	for _, m := range meta {
		if m.Key == key {
			return m.Value
		}
	}
	return ""
}

// callRemote sends a call to one of r's peers. A call that surely did not
// reach a peer (connection refused or lost before the request was written)
// moves on to the next peer.
func (n *Node) callRemote(ctx context.Context, r *route, msg any, over *target, cfg *callConfig) (Result, error) {
	cur := r.peers.Load()
	if cur == nil || len(*cur) == 0 || n.remote == nil {
		return n.notFound(r.pattern.String(), cfg)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return Result{}, toError(err)
	}
	if n.closed.Load() {
		return Result{}, errClosed()
	}
	if over != nil {
		if m, ok := msg.(map[string]any); ok {
			msg, over = merged(m, over), nil
		}
	}
	codec, payload, typ, err := encodePayload(msg)
	if err != nil {
		return Result{}, err
	}
	om := new(outMessage) // the message and room for its metadata, in one allocation
	m := &om.Message
	*m = Message{Pattern: r.pattern.String(), Codec: codec, Payload: payload}
	m.Meta = append(om.meta[:0], MetaPair{metaCaller, n.id})
	if typ != "" {
		m.Meta = append(m.Meta, MetaPair{metaType, typ})
	}
	if over != nil {
		m.Meta = append(m.Meta, MetaPair{metaOver, over.pattern.String()})
	}
	if cfg.noReply {
		m.Flags |= FlagNoReply
	}
	if cfg.idempotent {
		m.Flags |= FlagIdempotent
	}
	refeed := !cfg.noReply && !cfg.idempotent
	if refeed {
		// An id the call keeps if it is sent again: the serving node runs
		// it once however often it arrives.
		binary.BigEndian.PutUint64(om.id[:], n.callSeq.Add(1))
		m.Meta = append(m.Meta, MetaPair{metaCall, unsafe.String(&om.id[0], len(om.id))})
		m.Flags |= FlagKeep
	}
	timeout := n.remote.defaultTimeout
	if cfg.timeout > 0 {
		timeout = cfg.timeout
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout && cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	box := r.bal.Load()
	if box == nil {
		return n.notFound(r.pattern.String(), cfg)
	}
	bal := box.b
	n.remote.budget.deposit()
	pk := getPicker(n)
	defer putPicker(pk)
	var lastErr error
	var lastRefusal *Error
	refused, overloaded := 0, 0
	withdrawn := false // the budget paid for the next attempt
	for attempt := 0; ; attempt++ {
		t, ok := bal.Pick(cfg.key, pk.skipFn)
		if !ok && !pk.suspects {
			// Suspect peers get calls only when no other peer can.
			pk.suspects = true
			t, ok = bal.Pick(cfg.key, pk.skipFn)
		}
		if !ok {
			if withdrawn {
				n.remote.budget.refund() // no target left to retry on
			}
			break
		}
		withdrawn = false
		if attempt > 0 {
			m.Flags |= FlagRetry
			n.stats.retries.Add(1)
		}
		p, br := t.p, pk.br
		pk.tried = append(pk.tried, p)
		reply, err := n.callPeer(ctx, p, m, refeed)
		bal.Done(t)
		if err == nil && reply != nil && reply.Flags&FlagRefused != 0 {
			// Refused without running: shed by an overloaded node, not
			// served there any more, or closing. Another target may take
			// it.
			refused++
			switch {
			case reply.Code == CodeResourceExhausted:
				overloaded++
				if br != nil {
					br.Open()
				}
			case reply.Code == CodeNotFound:
				p.signalRefetch() // its catalog changed
				if br != nil {
					br.Success()
				}
			case br != nil:
				br.Failure()
			}
			lastRefusal = &Error{Code: reply.Code, Message: reply.Error}
			lastErr = lastRefusal
			continue
		}
		if err != nil {
			var e *Error
			switch ctxErr := ctx.Err(); {
			case ctxErr != nil:
				if br != nil {
					if ctxErr == context.DeadlineExceeded {
						br.Failure() // a timeout counts against the target
					} else {
						br.Success() // the caller gave up: nothing learnt of the target
					}
				}
				return Result{}, &Error{Code: CodeOf(ctxErr), Message: fmt.Sprintf("wizard: call %q to %s: %v", r.pattern.String(), p.addr, ctxErr), cause: ctxErr}
			case errors.Is(err, ErrNotSent):
				if br != nil {
					br.Failure()
				}
				lastErr = err
				continue // surely not run: the next target
			case errors.As(err, &e): // the transport refused it with a code
				if br != nil {
					br.Success()
				}
				return Result{}, e
			}
			if br != nil {
				br.Failure()
			}
			if cfg.idempotent {
				// It may have run; it is safe to run again elsewhere, within
				// the retry budget. (Refused and unsent calls cost their
				// target nothing and go on without it.)
				lastErr = err
				if !n.remote.budget.withdraw() {
					lastErr = fmt.Errorf("retry budget spent, last error: %w", err)
					break
				}
				withdrawn = true
				if !n.retryBackoff(ctx, attempt) {
					break
				}
				continue
			}
			return Result{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: call %q to %s: %v", r.pattern.String(), p.addr, err), cause: err}
		}
		if br != nil {
			br.Success()
		}
		if reply == nil { // NoReply
			return Result{}, nil
		}
		if reply.Code != CodeOK {
			e := &Error{Code: reply.Code, Message: reply.Error}
			if len(reply.Payload) > 0 {
				e.Details = decodeDetails(reply.Payload)
			}
			return Result{}, e
		}
		if reply.Codec == CodecNone && len(reply.Payload) == 0 {
			return Result{}, nil // nil, as in-process
		}
		// The payload decodes lazily, into the type the caller asks for; the
		// raw view lives in the reply, so boxing it allocates nothing.
		reply.in = raw{codec: reply.Codec, data: reply.Payload, typ: metaValue(reply.Meta, metaType)}
		return Result{v: &reply.in}, nil
	}
	tried := len(pk.tried)
	if refused > 0 && refused == tried {
		if overloaded == tried {
			return Result{}, &Error{Code: CodeResourceExhausted, Message: fmt.Sprintf("wizard: every target serving %q refused the call as overloaded (%d tried)", r.pattern.String(), tried), cause: ErrOverloaded}
		}
		return Result{}, lastRefusal // as the last target refused it
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return Result{}, &Error{Code: CodeOf(ctxErr), Message: fmt.Sprintf("wizard: call %q: %v (last error: %v)", r.pattern.String(), ctxErr, lastErr), cause: ctxErr}
	}
	if lastErr == nil {
		lastErr = errors.New("no target is connected")
	}
	return Result{}, &Error{Code: CodeUnavailable, Message: fmt.Sprintf("wizard: no peer serving %q could take the call (%d tried): %v", r.pattern.String(), tried, lastErr), cause: lastErr}
}
