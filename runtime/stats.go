package runtime

import "sync/atomic"

// Stats are a node's counters since it started.
type Stats struct {
	// Shed counts the calls this node refused as over its in-flight limit.
	Shed uint64
	// Retries counts the attempts this node sent to another target after
	// an attempt failed or was refused.
	Retries uint64
	// Refeeds counts the calls this node sent again, same id, to the same
	// run of a peer after the connection dropped.
	Refeeds uint64
	// Duplicates counts the calls this node received again and answered
	// from its de-duplication table (joining the running call or with the
	// stored answer) without running the handler.
	Duplicates uint64
	// ReadyWaits counts the times a [WaitForReady] call found no target
	// that could take it and began to wait for one.
	ReadyWaits uint64
}

type stats struct{ shed, retries, refeeds, duplicates, readyWaits atomic.Uint64 }

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Shed:       n.stats.shed.Load(),
		Retries:    n.stats.retries.Load(),
		Refeeds:    n.stats.refeeds.Load(),
		Duplicates: n.stats.duplicates.Load(),
		ReadyWaits: n.stats.readyWaits.Load(),
	}
}
