package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a configuration file: where it is and
// why. [Parse] and [Load] return every problem they find, joined with
// [errors.Join] in the order of the file; errors.As finds the first.
type Problem struct {
	// File is the file's name as given to [Parse] or [Load].
	File string
	// Line and Col locate the problem, from 1; zero when the problem
	// concerns the whole file.
	Line, Col int
	// Where is the setting concerned, as a path into the file
	// ("routes[2].pattern", "server"); empty for the file as a whole.
	Where string
	// Reason says what is wrong.
	Reason string
}

// Error formats the problem as FILE:LINE:COL: WHERE: REASON, the way
// compilers do, so editors can jump to it.
func (p *Problem) Error() string {
	s := p.File
	if p.Line > 0 {
		s += ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
	}
	s += ": "
	if p.Where != "" {
		s += p.Where + ": "
	}
	return s + p.Reason
}

// problems collects the problems of one file, the first maxProblems of
// them.
type problems struct {
	file string
	list []*Problem
	more int // problems beyond maxProblems
}

// maxProblems is how many problems a file reports, at most.
const maxProblems = 100

func (ps *problems) add(at pos, where, format string, args ...any) {
	if len(ps.list) == maxProblems {
		ps.more++
		return
	}
	// One problem is one line, whatever the parser's messages hold.
	reason := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", `\n`)
	where = strings.ReplaceAll(where, "\n", `\n`)
	ps.list = append(ps.list, &Problem{File: ps.file, Line: at.line, Col: at.col, Where: where, Reason: reason})
}

// err returns the problems sorted by position (stable: one position's
// problems keep the order they were found in), joined; nil for none.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	slices.SortStableFunc(ps.list, func(a, b *Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	errs := make([]error, len(ps.list), len(ps.list)+1)
	for i, p := range ps.list {
		errs[i] = p
	}
	if ps.more > 0 {
		errs = append(errs, &Problem{File: ps.file, Reason: fmt.Sprintf("%d more problems not shown", ps.more)})
	}
	return errors.Join(errs...)
}
