package mathsvc

import (
	"context"
	"io"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	"github.com/wizardmesh/wizard/runtime"
)

// Service implements mathv1.MathServiceHandler.
type Service struct {
	// Embedded so that methods added to the contract later answer
	// CodeUnimplemented until they are written.
	mathv1.UnimplementedMathServiceHandler
}

var _ mathv1.MathServiceHandler = (*Service)(nil)

// Register adds a [Service] to r (usually a *runtime.Node) under the
// MathService patterns.
func Register(r runtime.Registrar, opts ...runtime.HandlerOption) error {
	return mathv1.RegisterMathServiceHandler(r, &Service{}, opts...)
}

// Sum adds up the values.
func (*Service) Sum(_ context.Context, req *mathv1.SumRequest) (*mathv1.SumResponse, error) {
	var sum float64
	for _, v := range req.GetValues() {
		sum += v
	}
	return &mathv1.SumResponse{Sum: sum}, nil
}

// Product multiplies the values.
func (*Service) Product(_ context.Context, req *mathv1.ProductRequest) (*mathv1.ProductResponse, error) {
	product := 1.0
	for _, v := range req.GetValues() {
		product *= v
	}
	return &mathv1.ProductResponse{Product: product}, nil
}

// Divide divides; a zero divisor is a CodeInvalidArgument error.
func (*Service) Divide(_ context.Context, req *mathv1.DivideRequest) (*mathv1.DivideResponse, error) {
	if req.GetDivisor() == 0 {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "mathsvc: division of %v by zero", req.GetDividend())
	}
	return &mathv1.DivideResponse{Quotient: req.GetDividend() / req.GetDivisor()}, nil
}

// Add adds two numbers. The method is deprecated in the contract but still
// served, for old callers.
func (*Service) Add(_ context.Context, req *mathv1.AddRequest) (*mathv1.AddResponse, error) {
	return &mathv1.AddResponse{Sum: req.GetA() + req.GetB()}, nil
}

// Count sends 1, 2, ... n; a negative n is a CodeInvalidArgument error.
func (*Service) Count(_ context.Context, req *mathv1.CountRequest, s *runtime.ServerStream[*mathv1.CountRequest, *mathv1.CountResponse]) error {
	if req.GetN() < 0 {
		return runtime.Errorf(runtime.CodeInvalidArgument, "mathsvc: count to %d: n cannot be negative", req.GetN())
	}
	for i := int64(1); i <= req.GetN(); i++ {
		if err := s.Send(&mathv1.CountResponse{Value: i}); err != nil {
			return err
		}
	}
	return nil
}

// Total adds up the values it receives and answers once the caller closes
// its side.
func (*Service) Total(_ context.Context, s *runtime.ServerStream[*mathv1.TotalRequest, *mathv1.TotalResponse]) error {
	res := new(mathv1.TotalResponse)
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return s.Send(res)
		}
		if err != nil {
			return err
		}
		res.Sum += req.GetValue()
		res.Count++
	}
}

// Echo answers each request with its text until the caller closes its side.
func (*Service) Echo(_ context.Context, s *runtime.ServerStream[*mathv1.EchoRequest, *mathv1.EchoResponse]) error {
	for {
		req, err := s.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.Send(&mathv1.EchoResponse{Text: req.GetText()}); err != nil {
			return err
		}
	}
}
