package userssvc

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	usersv1 "github.com/wizardmesh/wizard/examples/gen/users/v1"
	"github.com/wizardmesh/wizard/runtime"
)

// BanPattern is where [Service.Ban] is added: the Moderate pattern plus the
// mixed-in action.
const BanPattern = usersv1.UsersServiceModeratePattern + ",action:ban"

// Service implements usersv1.UsersServiceHandler, keeping users in memory.
type Service struct {
	usersv1.UnimplementedUsersServiceHandler

	math mathv1.MathServiceClient

	mu    sync.Mutex
	users map[string]*usersv1.User
}

var _ usersv1.UsersServiceHandler = (*Service)(nil)

// New returns a service that totals points through math.
func New(math mathv1.MathServiceClient) *Service {
	return &Service{math: math, users: map[string]*usersv1.User{}}
}

// Register adds s to r (usually a *runtime.Node): the UsersService methods
// and, under [BanPattern], [Service.Ban].
func (s *Service) Register(r runtime.Registrar, opts ...runtime.HandlerOption) error {
	if err := usersv1.RegisterUsersServiceHandler(r, s, opts...); err != nil {
		return err
	}
	return r.Add(BanPattern, runtime.NewUnaryHandler(s.Ban), opts...)
}

// GetUser returns a user and the total of its points, summed by role:math.
func (s *Service) GetUser(ctx context.Context, req *usersv1.GetUserRequest) (*usersv1.GetUserResponse, error) {
	u, err := s.get(req.GetId())
	if err != nil {
		return nil, err
	}
	total, err := s.math.Sum(ctx, &mathv1.SumRequest{Values: u.GetPoints()})
	if err != nil {
		return nil, err
	}
	return &usersv1.GetUserResponse{User: u, TotalPoints: total.GetSum()}, nil
}

// PutUser creates or replaces a user; a new user's status is "active".
func (s *Service) PutUser(_ context.Context, req *usersv1.PutUserRequest) (*usersv1.PutUserResponse, error) {
	u := proto.Clone(req.GetUser()).(*usersv1.User)
	if u.GetId() == "" {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "userssvc: a user needs an id")
	}
	if u.Status == "" {
		u.Status = "active"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.GetId()] = u
	return &usersv1.PutUserResponse{}, nil
}

// moderated is the status each action the generic handler knows leaves.
var moderated = map[string]string{"warn": "warned", "suspend": "suspended", "restore": "active"}

// Moderate serves every moderation action without a handler of its own.
func (s *Service) Moderate(_ context.Context, req *usersv1.ModerateRequest) (*usersv1.ModerateResponse, error) {
	status, ok := moderated[req.GetAction()]
	if !ok {
		return nil, runtime.Errorf(runtime.CodeInvalidArgument, "userssvc: unknown moderation action %q", req.GetAction())
	}
	return s.setStatus(req.GetId(), status, nil)
}

// Ban serves Moderate calls whose action is "ban" (see [BanPattern]): the
// user is banned and loses its points.
func (s *Service) Ban(_ context.Context, req *usersv1.ModerateRequest) (*usersv1.ModerateResponse, error) {
	return s.setStatus(req.GetId(), "banned", func(u *usersv1.User) { u.Points = nil })
}

// RecordLogin notes a login. Callers do not wait for it (no_reply).
func (s *Service) RecordLogin(_ context.Context, req *usersv1.RecordLoginRequest) (*usersv1.RecordLoginResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[req.GetId()]
	if !ok {
		return nil, runtime.Errorf(runtime.CodeNotFound, "userssvc: no user %q", req.GetId())
	}
	u = proto.Clone(u).(*usersv1.User)
	u.LastLogin = req.GetAt()
	s.users[u.GetId()] = u
	return &usersv1.RecordLoginResponse{}, nil
}

// get returns a copy of a user, or a CodeNotFound error.
func (s *Service) get(id string) (*usersv1.User, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	if !ok {
		return nil, runtime.Errorf(runtime.CodeNotFound, "userssvc: no user %q", id)
	}
	return proto.Clone(u).(*usersv1.User), nil
}

func (s *Service) setStatus(id, status string, change func(*usersv1.User)) (*usersv1.ModerateResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	if !ok {
		return nil, runtime.Errorf(runtime.CodeNotFound, "userssvc: no user %q", id)
	}
	u = proto.Clone(u).(*usersv1.User)
	u.Status = status
	if change != nil {
		change(u)
	}
	s.users[id] = u
	return &usersv1.ModerateResponse{Id: id, Status: status}, nil
}
