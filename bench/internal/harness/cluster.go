package harness

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// ClusterRow is the cluster scenario's result for one contender: the
// median of its runs and how its balancer spread the calls.
type ClusterRow struct {
	Cell
	// Balancer says what spread the calls over the replicas.
	Balancer string
	// Served is how many calls each replica of B answered over all the
	// runs, warm-ups included, in the order the replicas were started.
	Served []uint64
}

// Spread is the difference between the busiest and the idlest replica as a
// fraction of the mean: 0 for a perfectly even spread.
func (r ClusterRow) Spread() float64 {
	if len(r.Served) == 0 {
		return 0
	}
	var sum uint64
	for _, n := range r.Served {
		sum += n
	}
	if sum == 0 {
		return 0
	}
	mean := float64(sum) / float64(len(r.Served))
	return float64(slices.Max(r.Served)-slices.Min(r.Served)) / mean
}

// runCluster runs the seed article's cluster scenario: callers -> A ->
// replicas of B, A's client balancing its calls over the replicas, each B
// answering after cfg.ClusterDelay; every service its own process.
func runCluster(ctx context.Context, cfg Config, cs []Contender, rep *Report, children *[]*child, profile func(string) string, logf func(string, ...any)) error {
	load := Load{Callers: cfg.ClusterCallers, Warmup: cfg.Warmup, Duration: cfg.Duration, MaxCalls: cfg.MaxCalls}
	type cluster struct {
		scenarioRun
		bs     []*child
		before []uint64
	}
	var clusters []*cluster
	defer func() {
		for _, k := range clusters {
			k.client.Close()
		}
	}()
	for _, c := range cs {
		if !c.Hops {
			continue
		}
		k := &cluster{scenarioRun: scenarioRun{c: c}}
		var addrs []string
		for i := range cfg.ClusterReplicas {
			b, err := startChild(ctx, ServerSpec{Contender: c.Name, Role: RoleSleep, Listen: "127.0.0.1:0", Delay: cfg.ClusterDelay,
				CPUProfile: profile(fmt.Sprintf("%s-cluster-B%d", c.Name, i+1))}, cfg.Stderr)
			if err != nil {
				return err
			}
			*children = append(*children, b)
			k.bs = append(k.bs, b)
			addrs = append(addrs, b.addr)
		}
		a, err := startChild(ctx, ServerSpec{Contender: c.Name, Role: RoleForward, Listen: "127.0.0.1:0", Upstreams: addrs,
			CPUProfile: profile(c.Name + "-cluster-A")}, cfg.Stderr)
		if err != nil {
			return err
		}
		*children = append(*children, a)
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		k.client, err = dialChecked(dctx, c, a.addr, DialOptions{})
		cancel()
		if err != nil {
			return err
		}
		clusters = append(clusters, k)
		if k.before, err = servedBy(ctx, k.bs); err != nil {
			return err
		}
		logf("%-14s cluster: A pid %d on %s -> %d replicas of B on %v", c.Title, a.Pid(), a.addr, len(addrs), addrs)
	}
	all := make([]*scenarioRun, len(clusters))
	for i, k := range clusters {
		all[i] = &k.scenarioRun
	}
	if err := driveRuns(ctx, cfg.Runs, load, "cluster", all, logf); err != nil {
		return err
	}
	for _, k := range clusters {
		after, err := servedBy(ctx, k.bs)
		if err != nil {
			return err
		}
		row := ClusterRow{Cell: cellOf(k.c, load.Callers, k.runs), Balancer: k.c.Balancer}
		for i := range after {
			row.Served = append(row.Served, after[i]-k.before[i])
		}
		if row.Balancer == "" {
			row.Balancer = harnessRoundRobin
		}
		logf("%-14s cluster: calls served per replica %v (spread %.1f%%)", k.c.Title, row.Served, 100*row.Spread())
		rep.Cluster = append(rep.Cluster, row)
	}
	return nil
}

// servedBy asks each replica how many calls it has answered.
func servedBy(ctx context.Context, bs []*child) ([]uint64, error) {
	out := make([]uint64, len(bs))
	for i, b := range bs {
		n, err := b.served(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// dialClusterChecked connects one client to the replicas at addrs (to the
// one server, when there is one address: see [dialChecked]) and makes one
// call to check the answer. The contender's own balancer spreads the calls
// ([Contender.DialCluster]); without one, the harness goes round robin over
// a client per replica.
func dialClusterChecked(ctx context.Context, c Contender, addrs []string, o DialOptions) (Client, error) {
	switch {
	case len(addrs) == 0:
		return nil, fmt.Errorf("%s: no address to call", c.Title)
	case len(addrs) == 1:
		return dialChecked(ctx, c, addrs[0], o)
	case c.DialCluster == nil:
		rr := &roundRobin{}
		for _, a := range addrs {
			cl, err := dialChecked(ctx, c, a, o)
			if err != nil {
				rr.Close()
				return nil, err
			}
			rr.cs = append(rr.cs, cl)
		}
		return rr, nil
	}
	cl, err := c.DialCluster(ctx, addrs, o)
	if err != nil {
		return nil, err
	}
	return firstCall(ctx, c, cl)
}

// harnessRoundRobin describes [roundRobin] in the report.
const harnessRoundRobin = "harness round robin, a client per replica"

// roundRobin spreads calls over one client per replica, in turn: the
// balancer of the contenders that have none of their own.
type roundRobin struct {
	cs   []Client
	next atomic.Uint64
}

func (r *roundRobin) Call(ctx context.Context, a, b float64) (float64, error) {
	i := (r.next.Add(1) - 1) % uint64(len(r.cs))
	return r.cs[i].Call(ctx, a, b)
}

func (r *roundRobin) Close() error {
	var first error
	for _, c := range r.cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
