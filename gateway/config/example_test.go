package config_test

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/wizardmesh/wizard/gateway/config"
)

func ExampleParse() {
	c, err := config.Parse("gateway.yaml", []byte(`
routes:
  - method: POST
    path: /api/users/{action}
    pattern: "role:users,cmd:{action}"
    vars: {action: {allow: [create, update]}}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	r := c.Routes[0]
	fmt.Println(r.Name, r.Timeout, r.MaxTimeout, r.Auth, c.Server.Listen, c.Server.MaxBody)
	// Output: POST /api/users/{action} 2s 10s none :8080 1MiB
}

func ExampleParse_problems() {
	_, err := config.Parse("gateway.yaml", []byte(`
routes:
  - method: POST
    path: /api/users/{action}
    pattrn: "role:users,cmd:{action}"
  - method: GET
    path: /api/users/{id
    pattern: "role:users,cmd:get"
`))
	fmt.Println(err)
	var p *config.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Line, p.Col, p.Where)
	}
	// Output:
	// gateway.yaml:3:5: routes[0]: pattern is required
	// gateway.yaml:5:5: routes[0]: unknown key "pattrn"; did you mean "pattern"?
	// gateway.yaml:7:11: routes[1].path: bad path template "/api/users/{id" at offset 11: '{' without '}'
	// 3 5 routes[0]
}

func ExampleTable_Match() {
	c, err := config.Parse("gateway.yaml", []byte(`
routes:
  - {method: POST, path: "/api/users/{action}", pattern: "role:users,cmd:{action}",
     vars: {action: {allow: [create, update]}}}
  - {method: GET, path: /api/users/me, pattern: "role:users,cmd:me"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := c.Table().Match("POST", "/api/users/create")
	if err != nil {
		fmt.Println(err)
		return
	}
	msg, err := m.Message(url.Values{"trace": {"1"}}, []byte(`{"name": "ada"}`))
	fmt.Println(m.Pattern, msg, err)

	for _, req := range [][2]string{{"POST", "/api/users/delete"}, {"DELETE", "/api/users/me"}, {"GET", "/nope"}} {
		_, err := c.Table().Match(req[0], req[1])
		var re *config.RequestError
		if errors.As(err, &re) {
			fmt.Println(re.Status, re.Code, re.Message, re.Allow)
		}
	}
	// Output:
	// cmd:create,role:users map[action:create name:ada trace:1] <nil>
	// 404 not_found no route for POST /api/users/delete: "delete" is not an allowed value of {action} []
	// 405 unimplemented method DELETE is not allowed for /api/users/me; allowed: GET, POST [GET POST]
	// 404 not_found no route for GET /nope []
}
