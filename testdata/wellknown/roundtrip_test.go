// This test is not built in place (the go tool skips testdata): the
// protoc-gen-wizard test TestCompileAndRoundTrip copies it into a temporary
// module beside the stubs generated from input.proto and runs it there.

package inventoryv1_test

import (
	"context"
	"errors"
	"testing"
	"time"

	inventoryv1 "example.com/golden/wellknown"
	"github.com/wizardmesh/wizard/runtime"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type inventory struct {
	inventoryv1.UnimplementedInventoryServiceHandler
	restocked chan *inventoryv1.RestockRequest
}

func (s *inventory) Reserve(ctx context.Context, req *inventoryv1.ReserveRequest) (*inventoryv1.Reservation, error) {
	return &inventoryv1.Reservation{
		Id:        "any-" + req.GetSku(),
		Warehouse: req.GetWarehouse(),
		Expires:   timestamppb.New(epoch.Add(req.GetHold().AsDuration())),
	}, nil
}

func (s *inventory) Restock(ctx context.Context, req *inventoryv1.RestockRequest) (*emptypb.Empty, error) {
	s.restocked <- req
	return &emptypb.Empty{}, nil
}

func (s *inventory) Count(ctx context.Context, req *inventoryv1.CountRequest) (*inventoryv1.CountResponse, error) {
	if req.GetSku() != "apple" {
		return nil, runtime.Errorf(runtime.CodeNotFound, "no sku %q", req.GetSku())
	}
	return &inventoryv1.CountResponse{Count: 12, AsOf: timestamppb.New(epoch)}, nil
}

type clock struct{}

func (clock) Now(ctx context.Context, _ *emptypb.Empty) (*timestamppb.Timestamp, error) {
	// The method's timeout option gives calls without a deadline one.
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("no deadline: the timeout option was not applied")
	}
	return timestamppb.New(epoch), nil
}

func TestRoundTrip(t *testing.T) {
	ctx := t.Context()
	node, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })

	inv := &inventory{restocked: make(chan *inventoryv1.RestockRequest, 1)}
	if err := inventoryv1.RegisterInventoryServiceHandler(node, inv); err != nil {
		t.Fatal(err)
	}
	if err := inventoryv1.RegisterClockServiceHandler(node, clock{}); err != nil {
		t.Fatal(err)
	}
	if err := inventoryv1.RegisterAuditServiceHandler(node, inventoryv1.UnimplementedAuditServiceHandler{}); err != nil {
		t.Fatal(err)
	}
	// One warehouse has its own handler: the mixin routes to it.
	north := runtime.NewUnaryHandler(func(ctx context.Context, req *inventoryv1.ReserveRequest) (*inventoryv1.Reservation, error) {
		return &inventoryv1.Reservation{Id: "north-" + req.GetSku(), Warehouse: "north"}, nil
	})
	if err := node.Add(inventoryv1.InventoryServiceReservePattern+",warehouse:north", north); err != nil {
		t.Fatal(err)
	}

	if got, want := inventoryv1.InventoryServiceReservePattern, "cmd:reserve,role:inventory,v:1"; got != want {
		t.Errorf("InventoryServiceReservePattern = %q, want %q", got, want)
	}

	inventory, err := inventoryv1.NewInventoryServiceClient(node)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ warehouse, id string }{{"north", "north-pear"}, {"south", "any-pear"}} {
		res, err := inventory.Reserve(ctx, &inventoryv1.ReserveRequest{Sku: "pear", Count: 1, Warehouse: tc.warehouse, Hold: durationpb.New(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if res.GetId() != tc.id {
			t.Errorf("Reserve in %s: id %q, want %q", tc.warehouse, res.GetId(), tc.id)
		}
	}

	res, err := inventory.Restock(ctx, &inventoryv1.RestockRequest{Sku: "apple", Count: 3})
	if res != nil || err != nil {
		t.Fatalf("Restock (no-reply) = %v, %v; want nil, nil", res, err)
	}
	select {
	case req := <-inv.restocked:
		if !proto.Equal(req, &inventoryv1.RestockRequest{Sku: "apple", Count: 3}) {
			t.Errorf("Restock handler got %v", req)
		}
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}

	count, err := inventory.Count(ctx, &inventoryv1.CountRequest{Sku: "apple"})
	if err != nil || count.GetCount() != 12 || !count.GetAsOf().AsTime().Equal(epoch) {
		t.Errorf("Count = %v, %v", count, err)
	}
	if _, err := inventory.Count(ctx, &inventoryv1.CountRequest{Sku: "kiwi"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Count of a missing sku: err %v, want not_found", err)
	}

	clock, err := inventoryv1.NewClockServiceClient(node)
	if err != nil {
		t.Fatal(err)
	}
	now, err := clock.Now(ctx, &emptypb.Empty{})
	if err != nil || !now.AsTime().Equal(epoch) {
		t.Errorf("Now = %v, %v", now, err)
	}

	audit, err := inventoryv1.NewAuditServiceClient(node)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.Last(ctx, &emptypb.Empty{}); !errors.Is(err, runtime.ErrUnimplemented) {
		t.Errorf("Last: err %v, want unimplemented", err)
	}

	// A node with no handlers answers a client's Default.
	empty, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { empty.Close() })
	fallback := timestamppb.New(time.Unix(0, 0))
	fallbackClock, err := inventoryv1.NewClockServiceClient(empty, runtime.Default(fallback))
	if err != nil {
		t.Fatal(err)
	}
	got, err := fallbackClock.Now(ctx, &emptypb.Empty{})
	if err != nil || got != fallback {
		t.Errorf("Now with Default = %v, %v; want the default", got, err)
	}
}
