package nats

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/wizardmesh/wizard/runtime/internal/bridge"
	"github.com/wizardmesh/wizard/runtime/internal/wire"
)

// Option configures a [Transport] in [New].
type Option interface{ apply(*Transport) error }

type optionFunc func(*Transport) error

func (f optionFunc) apply(t *Transport) error { return f(t) }

// WithURL sets the broker's URLs, tried in turn and on reconnect
// ("nats://10.0.0.7:4222", "tls://nats.example.com:4222"; the schemes
// nats, tls, ws and wss): by default nats://127.0.0.1:4222. [New] fails
// on an empty list and on a URL that does not parse or has another
// scheme.
func WithURL(urls ...string) Option {
	return optionFunc(func(t *Transport) error {
		if len(urls) == 0 {
			return errors.New("WithURL(): no URL; leave the option out for nats://127.0.0.1:4222")
		}
		for _, s := range urls {
			u, err := url.Parse(s)
			if err != nil {
				return fmt.Errorf("WithURL(%q): %v", s, err)
			}
			switch u.Scheme {
			case "nats", "tls", "ws", "wss":
			default:
				return fmt.Errorf("WithURL(%q): scheme %q; want nats, tls, ws or wss (nats://host:4222)", s, u.Scheme)
			}
			if u.Host == "" {
				return fmt.Errorf("WithURL(%q): no host (nats://host:4222)", s)
			}
		}
		t.urls = strings.Join(urls, ",")
		return nil
	})
}

// WithTLS connects to the broker over TLS with cfg: RootCAs to verify
// it, Certificates when the broker verifies its clients. [New] fails when
// cfg is nil.
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(t *Transport) error {
		if cfg == nil {
			return errors.New("WithTLS(nil): no configuration; leave the option out to connect without TLS")
		}
		t.nopts = append(t.nopts, natsgo.Secure(cfg))
		return nil
	})
}

// WithCredentials authenticates to the broker with a credentials file
// (a user JWT and its NKey seed, as nsc writes it). [New] fails when the
// file cannot be read, and when another way to authenticate is set.
func WithCredentials(file string) Option {
	return optionFunc(func(t *Transport) error {
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("WithCredentials(%q): %v", file, err)
		}
		return t.auth("WithCredentials", natsgo.UserCredentials(file))
	})
}

// WithNKeySeed authenticates to the broker with the NKey whose seed is
// in file. [New] fails when the file holds no valid seed, and when another
// way to authenticate is set.
func WithNKeySeed(file string) Option {
	return optionFunc(func(t *Transport) error {
		o, err := natsgo.NkeyOptionFromSeed(file)
		if err != nil {
			return fmt.Errorf("WithNKeySeed(%q): %v", file, err)
		}
		return t.auth("WithNKeySeed", o)
	})
}

// WithToken authenticates to the broker with a token. [New] fails when
// it is empty, and when another way to authenticate is set.
func WithToken(token string) Option {
	return optionFunc(func(t *Transport) error {
		if token == "" {
			return errors.New("WithToken(\"\"): an empty token")
		}
		return t.auth("WithToken", natsgo.Token(token))
	})
}

// WithUserInfo authenticates to the broker with a user name and
// password. [New] fails when the user is empty, and when another way to
// authenticate is set.
func WithUserInfo(user, password string) Option {
	return optionFunc(func(t *Transport) error {
		if user == "" {
			return errors.New("WithUserInfo: an empty user name")
		}
		return t.auth("WithUserInfo", natsgo.UserInfo(user, password))
	})
}

// auth records the one way to authenticate.
func (t *Transport) auth(name string, o natsgo.Option) error {
	if t.authBy != "" {
		return fmt.Errorf("%s and %s: choose one way to authenticate", t.authBy, name)
	}
	t.authBy = name
	t.nopts = append(t.nopts, o)
	return nil
}

// WithReconnect sets how the connection to the broker comes back once
// lost: wait between attempts to each URL (0 for the default, 2s; else at
// least 10ms), with nats.go's jitter, and at most max attempts (0 for the
// default, no limit; else at least 1). Calls made while the connection is
// down fail at once as not sent.
func WithReconnect(wait time.Duration, max int) Option {
	return optionFunc(func(t *Transport) error {
		if wait < 0 || wait > 0 && wait < 10*time.Millisecond {
			return fmt.Errorf("WithReconnect(%v, %d): want a wait of 0 for the default (2s) or at least 10ms", wait, max)
		}
		if max < 0 {
			return fmt.Errorf("WithReconnect(%v, %d): want 0 attempts for no limit, or at least 1", wait, max)
		}
		t.reconnectWait, t.maxReconnects = wait, max
		return nil
	})
}

// WithSubjectPrefix sets the prefix of the subjects a listener picks
// when it is given no subject of its own ("wizard.node" by default: a
// node listens on wizard.node.<random>). [New] fails on a prefix that is
// not a literal subject (empty tokens, wildcards, white space).
func WithSubjectPrefix(prefix string) Option {
	return optionFunc(func(t *Transport) error {
		if err := checkSubject(prefix); err != nil {
			return fmt.Errorf("WithSubjectPrefix(%q): %v", prefix, err)
		}
		t.prefix = prefix
		return nil
	})
}

// WithLogger receives a record for each message dropped as malformed, for
// the broker connection lost and back, and for a server going away; nil,
// the default, discards them. A listener's records at Warn and above are
// rate-limited (at most 10 of a kind every 10 seconds, then one that
// counts the others).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(t *Transport) error {
		t.log = l
		return nil
	})
}

// WithMaxFrameSize sets the largest call or reply sent or taken: 0 for
// the default (4 MiB), else from 14 bytes to 4 GiB. The broker's own
// limit (max_payload, 1 MiB by default) applies too: a call larger than
// either is refused before it is sent.
func WithMaxFrameSize(n int) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckMaxFrameSize(n); err != nil {
			return err
		}
		t.maxFrame = n
		return nil
	})
}

// WithKeepAlive sets how often a caller pings a node it has calls to
// while it hears nothing from it, and how long the node has to answer
// before the caller takes it as gone: 0 for the defaults (15s and 10s),
// else at least 10ms each; a negative interval turns pings off. While
// calls wait for answers the caller looks closer: it pings after 250ms
// without a message from the node and gives it 1s (at most interval and
// timeout). A node the caller hears from while its pong is late (an
// answer or a stream message) is behind, not gone: its pong comes after
// them, and it is pinged again. A node whose subscription is gone (its
// process died and the broker dropped it) is found at the first ping:
// the broker answers that no one listens.
func WithKeepAlive(interval, timeout time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckKeepAlive(interval, timeout); err != nil {
			return err
		}
		t.keepAlive, t.keepAliveTimeout = interval, timeout
		return nil
	})
}

// WithServeTimeout sets the deadline of a call that arrives without one:
// 0 for the default (30s), else at least 1ms.
func WithServeTimeout(d time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		if err := bridge.CheckServeTimeout(d); err != nil {
			return err
		}
		t.serveTimeout = d
		return nil
	})
}

// WithMaxServing bounds the calls a listener serves at once, whoever
// sends them, and apart from them its streams: 0 for the default (4096),
// else at least 1. A call or stream beyond it is refused at once without
// running (resource exhausted, flagged refused), so that its caller tries
// another node. A node's own runtime.WithMaxInFlight applies to calls as
// well, and [WithMaxStreams] to each caller's streams.
func WithMaxServing(n int) Option {
	return optionFunc(func(t *Transport) error {
		if n < 0 {
			return fmt.Errorf("WithMaxServing(%d): want 0 for the default (%d) or at least 1", n, defaultMaxServing)
		}
		t.maxServing = n
		return nil
	})
}

// WithStreamKeepAlive sets how the two sides of open streams watch each
// other, NATS having no connection between them: a caller with streams
// open to a node pings it every interval, and ends the streams (and the
// connection) when the node does not answer within timeout, or the
// broker answers that no one listens; a node ends the streams of a
// caller it has heard nothing from (no stream frame, no ping) for twice
// the interval plus the timeout. Both end them as lost (unavailable).
// 0 for the defaults (1s and 2s), else at least 10ms each; a negative
// interval turns the stream pings off (a lost peer's streams then end
// only with the call keep-alive, [WithKeepAlive], on the caller's side,
// and with their deadlines).
func WithStreamKeepAlive(interval, timeout time.Duration) Option {
	return optionFunc(func(t *Transport) error {
		const least = 10 * time.Millisecond
		if interval > 0 && interval < least || timeout < 0 || timeout > 0 && timeout < least {
			return fmt.Errorf("WithStreamKeepAlive(%v, %v): want an interval that is negative (no pings), 0 for the default (%v) or at least %v, and a timeout of 0 for the default (%v) or at least %v",
				interval, timeout, defaultStreamKeepAlive, least, defaultStreamKeepAliveTimeout, least)
		}
		t.streamKeepAlive, t.streamKeepAliveTimeout = interval, timeout
		return nil
	})
}

// WithStreamWindow sets a stream's receive window, each way, in bytes of
// message payloads (each message counting 64 bytes more): what it holds
// for Recv, beyond one message, before its sender blocks. 0 for the
// default (256 KiB, the protocol's initial window, which grows for a
// stream of large messages whose reader keeps up, to 4 MiB, as long as
// the streams between a caller and a node grew theirs by less than
// 16 MiB together), else from 256 KiB to 1 GiB, fixed. A larger window
// lets a stream carry more per round trip through the broker, at the
// cost of memory: a listener holds at most [WithMaxStreams] x (window +
// one message) of received messages per caller, plus what the default
// windows grew by.
func WithStreamWindow(n int) Option {
	return optionFunc(func(t *Transport) error {
		if n != 0 && (n < wire.InitialWindow || n > maxStreamWindow) {
			return fmt.Errorf("WithStreamWindow(%d): want 0 for the default (%d) or %d to %d bytes", n, wire.InitialWindow, wire.InitialWindow, maxStreamWindow)
		}
		t.streamWindow = n
		return nil
	})
}

// maxStreamWindow is the largest receive window: a grant always fits one
// stream-credit frame.
const maxStreamWindow = 1 << 30

// WithMaxStreams bounds the streams a listener serves at once for one
// caller (one broker connection of a caller, known by its reply inbox),
// as runtime/tcp's bounds those of one connection: 0 for the default
// (1024), else at least 1. A stream opened beyond is refused at once
// without running (resource exhausted, flagged refused).
func WithMaxStreams(n int) Option {
	return optionFunc(func(t *Transport) error {
		if n < 0 {
			return fmt.Errorf("WithMaxStreams(%d): want 0 for the default (%d) or at least 1", n, defaultMaxStreams)
		}
		t.maxStreams = n
		return nil
	})
}

// WithNATSOptions passes opts to nats.Connect after the transport's own:
// the escape hatch for what the options above do not cover (a custom
// dialer, an inbox prefix, ping intervals). The transport relies on two
// settings and sets them last: no reconnect buffer (a call made while
// the connection is down is not sent, not held) and its connection
// handlers.
func WithNATSOptions(opts ...natsgo.Option) Option {
	return optionFunc(func(t *Transport) error {
		for i, o := range opts {
			if o == nil {
				return fmt.Errorf("WithNATSOptions: option %d of %d is nil", i+1, len(opts))
			}
		}
		t.extra = append(t.extra, opts...)
		return nil
	})
}

// checkSubject checks that s is a literal NATS subject: tokens separated
// by dots, none empty, no wildcard, no white space.
func checkSubject(s string) error {
	if s == "" {
		return errors.New("empty subject")
	}
	if len(s) > maxSubject {
		return fmt.Errorf("subject of %d bytes, at most %d", len(s), maxSubject)
	}
	for tok := range strings.SplitSeq(s, ".") {
		switch {
		case tok == "":
			return errors.New("an empty token (two dots in a row, or a dot at an end)")
		case tok == "*" || tok == ">":
			return errors.New("a wildcard; want a literal subject")
		case strings.ContainsAny(tok, " \t\r\n"):
			return errors.New("white space")
		}
	}
	return nil
}

// maxSubject bounds a subject's length: a node's subject travels in every
// call and in discovery.
const maxSubject = 200
