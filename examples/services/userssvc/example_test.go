package userssvc_test

import (
	"context"
	"fmt"
	"log"

	mathv1 "github.com/wizardmesh/wizard/examples/gen/math/v1"
	usersv1 "github.com/wizardmesh/wizard/examples/gen/users/v1"
	"github.com/wizardmesh/wizard/examples/services/mathsvc"
	"github.com/wizardmesh/wizard/examples/services/userssvc"
	"github.com/wizardmesh/wizard/runtime"
)

// Two services on one node, wired with generated stubs only: users totals
// points by calling math.
func Example() {
	ctx := context.Background()
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
	if err := userssvc.New(math).Register(node); err != nil {
		log.Fatal(err)
	}

	users, err := usersv1.NewUsersServiceClient(node)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := users.PutUser(ctx, &usersv1.PutUserRequest{User: &usersv1.User{Id: "ada", Points: []float64{10, 32}}}); err != nil {
		log.Fatal(err)
	}
	got, err := users.GetUser(ctx, &usersv1.GetUserRequest{Id: "ada"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(got.GetUser().GetId(), got.GetUser().GetStatus(), got.GetTotalPoints())

	// The action routes: "ban" has a handler of its own.
	for _, action := range []string{"warn", "ban"} {
		res, err := users.Moderate(ctx, &usersv1.ModerateRequest{Id: "ada", Action: action})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(action, "->", res.GetStatus())
	}
	// Output:
	// ada active 42
	// warn -> warned
	// ban -> banned
}
