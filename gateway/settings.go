package gateway

import (
	"net/netip"
	"time"
)

// settings are the gateway's limits and policies, as the configuration
// gives them (defaults applied).
type settings struct {
	maxBody           int64
	maxHeaderBytes    int
	accessLog         bool
	readHeaderTimeout time.Duration
	readTimeout       time.Duration
	readBodyTimeout   time.Duration // a request's body, from the end of its headers
	writeTimeout      time.Duration
	idleTimeout       time.Duration
	grace             time.Duration // graceful shutdown's drain bound
	cors              corsPolicy
	ws                wsSettings
	perIP             rateSpec
	perSubject        rateSpec
	maxTimeout        time.Duration  // the default route's bound on a client's hint
	trustedProxies    []netip.Prefix // peers whose X-Forwarded-For names the client
}

// wsSettings are the WebSocket endpoint's.
type wsSettings struct {
	path        string // "" : no WebSocket endpoint
	origins     []string
	maxMessage  int64
	maxInflight int
	maxStreams  int // streams open at once
	sendQueue   int
	maxSubs     int  // event subscriptions open at once
	eventQueue  int  // events waiting per connection
	eventClose  bool // a full event queue closes the connection (else drops its oldest)

	maxGarbage int           // garbage frames answered before the connection is closed
	maxLimited int           // rate-limited (429) replies in a row before the connection is closed (4029)
	ping       time.Duration // protocol pings this often (0: none)
	idle       time.Duration // closed after this long without a frame or a pong (0: never)
}

// rateSpec is a token bucket's: rate tokens a second, burst at most; a
// zero rate is no limit.
type rateSpec struct {
	rate  float64
	burst int
}

// Defaults, where the configuration says nothing.
const (
	defaultMaxBody           = 1 << 20
	defaultReadHeaderTimeout = 5 * time.Second
	defaultReadBodyTimeout   = 30 * time.Second
	defaultIdleTimeout       = 120 * time.Second
	defaultGrace             = 10 * time.Second
	defaultMaxMessage        = 64 << 10
	defaultMaxInflight       = 64
	defaultMaxStreams        = 16
	defaultSendQueue         = 256
	defaultMaxSubs           = 32
	defaultEventQueue        = 64
	defaultMaxGarbage        = 3
	defaultMaxLimited        = 10
	defaultTimeout           = 2 * time.Second
	defaultMaxTimeout        = 10 * time.Second
)

// withDefaults returns s with every zero field at its default.
func (s settings) withDefaults() settings {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if s.maxBody == 0 {
		s.maxBody = defaultMaxBody
	}
	def(&s.readHeaderTimeout, defaultReadHeaderTimeout)
	def(&s.readBodyTimeout, defaultReadBodyTimeout)
	def(&s.idleTimeout, defaultIdleTimeout)
	def(&s.grace, defaultGrace)
	def(&s.maxTimeout, defaultMaxTimeout)
	if s.ws.maxMessage == 0 {
		s.ws.maxMessage = defaultMaxMessage
	}
	if s.ws.maxInflight == 0 {
		s.ws.maxInflight = defaultMaxInflight
	}
	if s.ws.maxStreams == 0 {
		s.ws.maxStreams = defaultMaxStreams
	}
	if s.ws.sendQueue == 0 {
		s.ws.sendQueue = defaultSendQueue
	}
	if s.ws.maxSubs == 0 {
		s.ws.maxSubs = defaultMaxSubs
	}
	if s.ws.eventQueue == 0 {
		s.ws.eventQueue = defaultEventQueue
	}
	if s.ws.maxGarbage == 0 {
		s.ws.maxGarbage = defaultMaxGarbage
	}
	if s.ws.maxLimited == 0 {
		s.ws.maxLimited = defaultMaxLimited
	}
	return s
}
