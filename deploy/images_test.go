package deploy

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wizardmesh/wizard/internal/testkit/need"
)

// root is the repository's root, the images' build context.
const root = ".."

// image is what a Dockerfile under images/ says of its binary.
type image struct {
	file    string
	name    string   // the binary: the file's name without .Dockerfile
	env     []string // the go build's environment: CGO_ENABLED=0
	flags   []string // go build's flags, but -o
	out     string   // -o
	pkg     string   // the package built
	final   []string // the last stage's instructions
	entry   string   // the last stage's ENTRYPOINT
	user    string   // the last stage's USER
	hasCopy bool     // the last stage copies /out/NAME to /NAME
}

// readImages parses every images/*.Dockerfile.
func readImages(t *testing.T) []image {
	t.Helper()
	files, err := filepath.Glob("images/*.Dockerfile")
	if err != nil || len(files) == 0 {
		t.Fatalf("no images/*.Dockerfile (%v)", err)
	}
	var out []image
	for _, f := range files {
		im, err := parseDockerfile(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, im)
	}
	return out
}

func parseDockerfile(file string) (image, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return image{}, err
	}
	im := image{file: file, name: strings.TrimSuffix(filepath.Base(file), ".Dockerfile")}
	builds := 0
	for _, line := range instructions(string(b)) {
		words := shellWords(line)
		switch strings.ToUpper(words[0]) {
		case "FROM":
			im.final = nil
		case "RUN":
			if i := slices.Index(words, "go"); i > 0 && i+1 < len(words) && words[i+1] == "build" {
				builds++
				if err := im.parseBuild(words[1:i], words[i+2:]); err != nil {
					return image{}, err
				}
			}
		case "USER":
			im.user = words[1]
		case "ENTRYPOINT":
			im.entry = strings.TrimSpace(line[len(words[0]):])
		}
		im.final = append(im.final, line)
	}
	if builds != 1 {
		return image{}, fmt.Errorf("%d go build commands, want 1", builds)
	}
	im.hasCopy = slices.Contains(im.final, fmt.Sprintf("COPY --from=build /out/%s /%s", im.name, im.name))
	return im, nil
}

// parseBuild reads `ENV... go build FLAGS -o OUT PKG`.
func (im *image) parseBuild(env, args []string) error {
	im.env = env
	if len(args) < 3 || args[len(args)-3] != "-o" {
		return fmt.Errorf("go build %s: want FLAGS -o OUT PACKAGE", strings.Join(args, " "))
	}
	im.flags, im.out, im.pkg = args[:len(args)-3], args[len(args)-2], args[len(args)-1]
	return nil
}

// instructions returns a Dockerfile's instructions, continuation lines
// joined, comments and blank lines dropped.
func instructions(text string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	return out
}

// shellWords splits s at spaces outside single and double quotes, and
// drops the quotes: as the shell does with the words of a RUN line.
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// TestDockerfiles: each image builds its binary static and stripped, and
// runs it alone in an empty image as a non-root user.
func TestDockerfiles(t *testing.T) {
	for _, im := range readImages(t) {
		t.Run(im.name, func(t *testing.T) {
			if !slices.Contains(im.env, "CGO_ENABLED=0") {
				t.Errorf("go build's environment %v lacks CGO_ENABLED=0", im.env)
			}
			if !slices.Contains(im.flags, "-trimpath") {
				t.Errorf("go build %v lacks -trimpath", im.flags)
			}
			if ld := ldflags(im.flags); !slices.Contains(ld, "-s") || !slices.Contains(ld, "-w") {
				t.Errorf("-ldflags %v lacks -s -w", ld)
			}
			if want := "/out/" + im.name; im.out != want {
				t.Errorf("go build -o %s, want %s", im.out, want)
			}
			if got := im.final[0]; got != "FROM scratch" {
				t.Errorf("the last stage is %q, want FROM scratch", got)
			}
			if !im.hasCopy {
				t.Errorf("the last stage does not copy /out/%s to /%s", im.name, im.name)
			}
			if diff := cmp.Diff(fmt.Sprintf(`["/%s"]`, im.name), im.entry); diff != "" {
				t.Errorf("ENTRYPOINT (-want +got):\n%s", diff)
			}
			if im.user != "65532:65532" {
				t.Errorf("USER %q, want 65532:65532 (non-root)", im.user)
			}
		})
	}
}

func ldflags(flags []string) []string {
	for i, f := range flags {
		if v, ok := strings.CutPrefix(f, "-ldflags="); ok {
			return strings.Fields(v)
		}
		if f == "-ldflags" && i+1 < len(flags) {
			return strings.Fields(flags[i+1])
		}
	}
	return nil
}

// buildBinaries builds each image's binary into dir/bin as its
// Dockerfile does: the same environment, flags and package, for Linux.
func buildBinaries(t *testing.T, images []image, dir string) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		need.Skipf(t, "no go tool on PATH")
	}
	for _, im := range images {
		args := append([]string{"build"}, im.flags...)
		args = append(args, "-o", filepath.Join(dir, "bin", im.name), im.pkg)
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=linux")
		cmd.Env = append(cmd.Env, im.env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: go %s: %v\n%s", im.name, strings.Join(args, " "), err, out)
		}
	}
}

// TestStaticBinaries builds the images' binaries with their Dockerfiles'
// command and checks that each is static, as an empty image needs: an
// ELF file with no interpreter and no dynamic section.
func TestStaticBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every image's binary")
	}
	images := readImages(t)
	dir := t.TempDir()
	buildBinaries(t, images, dir)
	for _, im := range images {
		t.Run(im.name, func(t *testing.T) {
			f, err := elf.Open(filepath.Join(dir, "bin", im.name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("a %v program header: the binary is dynamically linked", p.Type)
				}
			}
			if s := f.Section(".dynamic"); s != nil {
				t.Error("a .dynamic section: the binary is dynamically linked")
			}
			if s := f.Section(".symtab"); s != nil {
				t.Error("a symbol table: the binary is not stripped (-ldflags=-s)")
			}
		})
	}
}

// caBundle is the system's CA bundle, which the images carry for the
// gateway's and the services' outgoing TLS (a JWKS URL).
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// TestImages builds every image with buildah (Debian's package, vfs
// storage, chroot isolation: no daemon, no privileges beyond root) from
// binaries built here (BUILDER=prebuilt: the Go image cannot be pulled
// on a machine without a registry), then runs each binary in its image.
func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every image")
	}
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		need.Skipf(t, "no buildah on PATH (apt-get install buildah)")
	}
	if os.Geteuid() != 0 {
		need.Skipf(t, "buildah with vfs storage and chroot isolation needs root")
	}
	if _, err := os.Stat(caBundle); err != nil {
		need.Skipf(t, "no CA bundle: %v", err)
	}
	images := readImages(t)
	dir := t.TempDir()
	buildBinaries(t, images, dir)
	copyFile(t, caBundle, filepath.Join(dir, "bin", "ca-certificates.crt"))
	storage := []string{"--root", filepath.Join(dir, "storage"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), buildah, append(slices.Clone(storage), args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() {
		exec.Command(buildah, append(slices.Clone(storage), "rm", "--all")...).Run()
		exec.Command(buildah, append(slices.Clone(storage), "rmi", "--all", "--force")...).Run()
	})
	// What each binary is run with to show it starts: it exits 0.
	smoke := map[string][]string{
		"wizard":         {"version"},
		"wizard-gateway": {"--version"},
		"mathserver":     {"-h"},
		"usersserver":    {"-h"},
	}
	for _, im := range images {
		t.Run(im.name, func(t *testing.T) {
			tag := "localhost/wizard-test/" + im.name + ":test"
			dockerfile, err := filepath.Abs(im.file)
			if err != nil {
				t.Fatal(err)
			}
			run(t, "bud", "--isolation", "chroot", "--build-arg", "BUILDER=prebuilt", "-f", dockerfile, "-t", tag, dir)
			got := run(t, "inspect", "--type", "image", "--format", "{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}}", tag)
			if want := fmt.Sprintf(`65532:65532 [/%s]`, im.name); got != want {
				t.Errorf("the image's user and entrypoint: %s, want %s", got, want)
			}
			args, ok := smoke[im.name]
			if !ok {
				t.Fatalf("no smoke arguments for %s", im.name)
			}
			ctr := run(t, "from", tag)
			out := run(t, append([]string{"run", "--isolation", "chroot", ctr, "--", "/" + im.name}, args...)...)
			t.Logf("%s %s: %s", im.name, strings.Join(args, " "), firstLine(out))
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
