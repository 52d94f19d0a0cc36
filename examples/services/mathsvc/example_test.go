package mathsvc_test

import (
	"context"
	"fmt"
	"io"
	"log"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/runtime"
)

func Example() {
	node, err := runtime.New()
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	if err := mathsvc.Register(node); err != nil {
		log.Fatal(err)
	}

	math, err := mathv1.NewMathServiceClient(node)
	if err != nil {
		log.Fatal(err)
	}
	res, err := math.Sum(context.Background(), &mathv1.SumRequest{Values: []float64{1, 2, 3}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(mathv1.MathServiceSumPattern, res.GetSum())

	_, err = math.Divide(context.Background(), &mathv1.DivideRequest{Dividend: 1})
	fmt.Println(runtime.CodeOf(err), err)
	// Output:
	// cmd:sum,role:math 6
	// invalid_argument mathsvc: division of 1 by zero
}

// A server stream through the generated client: Count sends 1 to n, then
// ends the stream.
func Example_count() {
	node, err := runtime.New()
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	if err := mathsvc.Register(node); err != nil {
		log.Fatal(err)
	}

	math, err := mathv1.NewMathServiceClient(node)
	if err != nil {
		log.Fatal(err)
	}
	s, err := math.Count(context.Background(), &mathv1.CountRequest{N: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for {
		res, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.GetValue())
	}
	// Output:
	// 1
	// 2
	// 3
}
