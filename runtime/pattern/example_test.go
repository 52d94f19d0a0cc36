package pattern_test

import (
	"errors"
	"fmt"

	"github.com/wizardmesh/wizard/runtime/pattern"
)

func ExampleParse() {
	p, err := pattern.Parse(` role : math , cmd:sum, v:1.0, note:"a,b" `)
	if err != nil {
		panic(err)
	}
	fmt.Println(p)

	_, err = pattern.Parse("role:math,,cmd:sum")
	var perr *pattern.ParseError
	fmt.Println(errors.As(err, &perr), perr.Pos, perr.Reason)
	// Output:
	// cmd:sum,note:"a,b",role:math,v:1
	// true 10 empty pair
}
