package userssvc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	usersv1 "github.com/wizardmesh/wizard/examples/gen/users/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/examples/services/userssvc"
	"github.com/wizardmesh/wizard/runtime"
)

// newMathClient is mathv1.NewMathServiceClient, failing t on an error.
func newMathClient(t testing.TB, c runtime.Caller, opts ...runtime.CallOption) mathv1.MathServiceClient {
	t.Helper()
	cl, err := mathv1.NewMathServiceClient(c, opts...)
	if err != nil {
		t.Fatalf("NewMathServiceClient: %v", err)
	}
	return cl
}

// newUsersClient is usersv1.NewUsersServiceClient, failing t on an error.
func newUsersClient(t testing.TB, c runtime.Caller, opts ...runtime.CallOption) usersv1.UsersServiceClient {
	t.Helper()
	cl, err := usersv1.NewUsersServiceClient(c, opts...)
	if err != nil {
		t.Fatalf("NewUsersServiceClient: %v", err)
	}
	return cl
}

// mesh is one in-process node running both example services; users calls
// math through the node.
func mesh(t *testing.T) (*runtime.Node, *userssvc.Service) {
	t.Helper()
	node, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	if err := mathsvc.Register(node); err != nil {
		t.Fatal(err)
	}
	svc := userssvc.New(newMathClient(t, node))
	if err := svc.Register(node); err != nil {
		t.Fatal(err)
	}
	return node, svc
}

func put(t *testing.T, users usersv1.UsersServiceClient, u *usersv1.User) {
	t.Helper()
	if _, err := users.PutUser(t.Context(), &usersv1.PutUserRequest{User: u}); err != nil {
		t.Fatal(err)
	}
}

// TestGetUser: users → math through generated clients on one node.
func TestGetUser(t *testing.T) {
	node, _ := mesh(t)
	users := newUsersClient(t, node)
	put(t, users, &usersv1.User{Id: "ada", Name: "Ada", Points: []float64{10, 20, 12.5}})

	res, err := users.GetUser(t.Context(), &usersv1.GetUserRequest{Id: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	want := &usersv1.GetUserResponse{
		User:        &usersv1.User{Id: "ada", Name: "Ada", Points: []float64{10, 20, 12.5}, Status: "active"},
		TotalPoints: 42.5,
	}
	if diff := cmp.Diff(want, res, protocmp.Transform()); diff != "" {
		t.Errorf("GetUser (-want +got):\n%s", diff)
	}

	if _, err := users.GetUser(t.Context(), &usersv1.GetUserRequest{Id: "bob"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("GetUser of a missing user: err %v, want not_found", err)
	}
	if _, err := users.PutUser(t.Context(), &usersv1.PutUserRequest{User: &usersv1.User{}}); !errors.Is(err, runtime.ErrInvalidArgument) {
		t.Errorf("PutUser without id: err %v, want invalid_argument", err)
	}
}

// TestModerateMixin: the request's action joins the pattern, so "ban"
// reaches the handler added under userssvc.BanPattern and every other
// action the generated UsersServiceHandler registration.
func TestModerateMixin(t *testing.T) {
	node, _ := mesh(t)
	users := newUsersClient(t, node)
	ctx := t.Context()
	tests := []struct {
		action     string
		wantStatus string
		wantPoints float64 // Ban drops them
		wantErr    error
	}{
		{action: "warn", wantStatus: "warned", wantPoints: 5},
		{action: "ban", wantStatus: "banned", wantPoints: 0},
		{action: "restore", wantStatus: "active", wantPoints: 5},
		{action: "tickle", wantErr: runtime.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			put(t, users, &usersv1.User{Id: "eve", Points: []float64{2, 3}})
			res, err := users.Moderate(ctx, &usersv1.ModerateRequest{Id: "eve", Action: tt.action})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.GetStatus() != tt.wantStatus {
				t.Errorf("status %q, want %q", res.GetStatus(), tt.wantStatus)
			}
			got, err := users.GetUser(ctx, &usersv1.GetUserRequest{Id: "eve"})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetTotalPoints() != tt.wantPoints || got.GetUser().GetStatus() != tt.wantStatus {
				t.Errorf("after %s: user %v, total %v; want status %q, total %v", tt.action, got.GetUser(), got.GetTotalPoints(), tt.wantStatus, tt.wantPoints)
			}
		})
	}

}

// TestModerateRouting shows which pattern each action routes to, with a
// probe added over both handlers (Override keeps the real one as prior).
func TestModerateRouting(t *testing.T) {
	node, _ := mesh(t)
	users := newUsersClient(t, node)
	put(t, users, &usersv1.User{Id: "eve"})
	var got []string
	probe := func(ctx context.Context, r runtime.Request) (any, error) {
		got = append(got, r.Pattern().String())
		return r.Prior(ctx, r.Msg())
	}
	for _, p := range []string{usersv1.UsersServiceModeratePattern, userssvc.BanPattern} {
		if err := node.Add(p, probe, runtime.Override()); err != nil {
			t.Fatal(err)
		}
	}
	for _, action := range []string{"warn", "ban", "suspend"} {
		if _, err := users.Moderate(t.Context(), &usersv1.ModerateRequest{Id: "eve", Action: action}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"cmd:moderate,role:users", "action:ban,cmd:moderate,role:users", "cmd:moderate,role:users"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("matched patterns (-want +got):\n%s", diff)
	}
}

// signalLogin wraps the service to tell the test when a no-reply call has
// been served.
type signalLogin struct {
	*userssvc.Service
	served chan error
}

func (s signalLogin) RecordLogin(ctx context.Context, req *usersv1.RecordLoginRequest) (*usersv1.RecordLoginResponse, error) {
	res, err := s.Service.RecordLogin(ctx, req)
	s.served <- err
	return res, err
}

// TestRecordLoginNoReply: the client returns at once with no response; the
// handler runs anyway, and the test waits for it on a channel.
func TestRecordLoginNoReply(t *testing.T) {
	ctx := t.Context()
	node, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	if err := mathsvc.Register(node); err != nil {
		t.Fatal(err)
	}
	svc := signalLogin{userssvc.New(newMathClient(t, node)), make(chan error, 1)}
	if err := usersv1.RegisterUsersServiceHandler(node, svc); err != nil {
		t.Fatal(err)
	}
	users := newUsersClient(t, node)
	put(t, users, &usersv1.User{Id: "ada"})

	at := timestamppb.New(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	res, err := users.RecordLogin(ctx, &usersv1.RecordLoginRequest{Id: "ada", At: at})
	if res != nil || err != nil {
		t.Fatalf("RecordLogin (no-reply) = %v, %v; want nil, nil", res, err)
	}
	select {
	case err := <-svc.served:
		if err != nil {
			t.Fatalf("the handler failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	got, err := users.GetUser(ctx, &usersv1.GetUserRequest{Id: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetUser().GetLastLogin().AsTime().Equal(at.AsTime()) {
		t.Errorf("last login %v, want %v", got.GetUser().GetLastLogin(), at)
	}

	// A no-reply call that cannot be routed still reports it.
	empty, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { empty.Close() })
	if _, err := newUsersClient(t, empty).RecordLogin(ctx, &usersv1.RecordLoginRequest{Id: "ada"}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("RecordLogin with no handler: err %v, want not_found", err)
	}
}

// deadlines records the deadline GetUser sees.
type deadlines struct {
	usersv1.UnimplementedUsersServiceHandler
	left chan time.Duration
}

func (d deadlines) GetUser(ctx context.Context, _ *usersv1.GetUserRequest) (*usersv1.GetUserResponse, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		d.left <- -1
	} else {
		d.left <- time.Until(dl)
	}
	return &usersv1.GetUserResponse{}, nil
}

// TestTimeoutOption: GetUser's (wizard.v1.method) timeout of 2s bounds
// calls made without a deadline; a caller's option overrides it.
func TestTimeoutOption(t *testing.T) {
	node, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	h := deadlines{left: make(chan time.Duration, 1)}
	if err := usersv1.RegisterUsersServiceHandler(node, h); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opts []runtime.CallOption
		max  time.Duration
	}{
		{"from the contract", nil, 2 * time.Second},
		{"client option wins", []runtime.CallOption{runtime.Timeout(time.Hour)}, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newUsersClient(t, node, tt.opts...).GetUser(context.Background(), &usersv1.GetUserRequest{}); err != nil {
				t.Fatal(err)
			}
			left := <-h.left
			if left <= 0 || left > tt.max || left <= tt.max/2 {
				t.Errorf("handler saw %v left, want about %v", left, tt.max)
			}
		})
	}
}

// TestDefault: a node without the users service answers a call's Default.
func TestDefault(t *testing.T) {
	node, err := runtime.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	guest := &usersv1.GetUserResponse{User: &usersv1.User{Id: "guest", Status: "active"}}
	res, err := newUsersClient(t, node).GetUser(t.Context(), &usersv1.GetUserRequest{Id: "ada"}, runtime.Default(guest))
	if err != nil || res != guest {
		t.Errorf("GetUser with Default = %v, %v; want the default", res, err)
	}
}
