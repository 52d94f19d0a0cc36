package main

import "testing"

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"Sum":         "sum",
		"GetUser":     "get_user",
		"HTTPGet":     "http_get",
		"GetV2":       "get_v2",
		"Sum2Numbers": "sum2_numbers",
		"Get_Thing":   "get_thing",
		"ID":          "id",
		"getURLFor":   "get_url_for",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnexport(t *testing.T) {
	for in, want := range map[string]string{
		"Sum":     "sum",
		"HTTPGet": "httpGet",
		"ID":      "id",
		"Type":    "type_",
		"Go":      "go_",
		"X":       "x",
	} {
		if got := unexport(in); got != want {
			t.Errorf("unexport(%q) = %q, want %q", in, got, want)
		}
	}
}
