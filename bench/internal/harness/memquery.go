package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"
)

// The "mem" query of the control protocol: the server process collects
// garbage and answers its goroutine count and Go memory, so that the
// connections mode can say what holds the memory it sees in the RSS.
const (
	queryMem  = "mem"
	answerMem = "mem "
)

// MemStats is a server process's answer to the "mem" query, after a
// collection.
type MemStats struct {
	Goroutines int    `json:"goroutines"`
	HeapInuse  uint64 `json:"heap_inuse"`  // bytes in in-use heap spans
	HeapAlloc  uint64 `json:"heap_alloc"`  // bytes of live heap objects
	StackInuse uint64 `json:"stack_inuse"` // bytes of goroutine stacks
	Sys        uint64 `json:"sys"`         // bytes obtained from the OS
}

// memAnswer collects garbage and returns the answer to the "mem" query.
func memAnswer() string {
	b, _ := json.Marshal(readMem())
	return answerMem + string(b)
}

// readMem collects garbage and returns this process's goroutines and Go
// memory.
func readMem() MemStats {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemStats{Goroutines: runtime.NumGoroutine(), HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, StackInuse: ms.StackInuse, Sys: ms.Sys}
}

// answerControl answers the queries of a server that has no counter
// (the echo servers): "mem", and any other as unknown.
func answerControl(q string) string {
	if strings.TrimSpace(q) == queryMem {
		return memAnswer()
	}
	return "unknown query " + strings.TrimSpace(q)
}

// mem asks the child for its goroutines and Go memory.
func (c *child) mem(ctx context.Context) (MemStats, error) {
	var m MemStats
	l, err := c.Ask(ctx, queryMem, 10*time.Second)
	if err != nil {
		return m, err
	}
	js, ok := strings.CutPrefix(l, answerMem)
	if !ok {
		return m, fmt.Errorf("server %s/%s answered %q to %q", c.spec.Contender, c.spec.Role, l, queryMem)
	}
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return m, fmt.Errorf("server %s/%s: answer to %q: %w", c.spec.Contender, c.spec.Role, queryMem, err)
	}
	return m, nil
}
