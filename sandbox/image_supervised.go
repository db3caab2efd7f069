package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"
	"github.com/sandboxctl/sandboxctl/envknob"
)

// SupervisorBinaryName is looked up next to the running executable.
const SupervisorBinaryName = "sandboxctl-supervisor"

// SupervisorPath is where the derived image holds the supervisor.
const SupervisorPath = "/.sandboxctl/supervisor"

// SupervisedRepo is the repository of derived images: the configured image
// plus the supervisor, tagged by a hash of the base image id and the
// supervisor binary.
const SupervisedRepo = "sandboxctl/supervised"

// Labels of supervised containers and derived images.
const (
	LabelSupervisor     = "sandboxctl.supervisor"      // supervisor binary hash
	LabelSupervisorBase = "sandboxctl.supervisor.base" // base image id (derived images)
)

// supervisorBin is the supervisor binary this Manager delivers.
type supervisorBin struct {
	path string
	hash string // sha256 hex of the binary
	arch string // GOARCH of the ELF binary
	data []byte
}

// resolveSupervisor finds the supervisor binary: explicit path, then
// $SANDBOXCTL_SUPERVISOR, then sandboxctl-supervisor next to the
// executable. A missing or unusable binary returns a warning instead.
func resolveSupervisor(explicit string) (*supervisorBin, string) {
	path, from := explicit, "Options.SupervisorBinary"
	if path == "" {
		path, from = os.Getenv(string(envknob.Supervisor)), "$"+string(envknob.Supervisor)
	}
	if path == "" {
		exe, err := os.Executable()
		if err == nil {
			cand := filepath.Join(filepath.Dir(exe), SupervisorBinaryName)
			if _, err := os.Stat(cand); err == nil {
				path, from = cand, "next to "+filepath.Base(exe)
			}
		}
	}
	if path == "" {
		return nil, "sandbox supervisor binary not found (set " + string(envknob.Supervisor) + " or install " + SupervisorBinaryName +
			" next to sandboxctl); using the plain Engine exec path"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Sprintf("sandbox supervisor binary %s (%s) unreadable: %v; using the plain Engine exec path", path, from, err)
	}
	arch, err := elfArch(data)
	if err != nil {
		return nil, fmt.Sprintf("sandbox supervisor binary %s: %v; using the plain Engine exec path", path, err)
	}
	sum := sha256.Sum256(data)
	return &supervisorBin{path: path, hash: hex.EncodeToString(sum[:]), arch: arch, data: data}, ""
}

// elfArch returns the GOARCH of a static Linux ELF executable.
func elfArch(data []byte) (string, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return "", fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errors.New("dynamically linked (build it with CGO_ENABLED=0)")
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64", nil
	case elf.EM_AARCH64:
		return "arm64", nil
	case elf.EM_386:
		return "386", nil
	case elf.EM_ARM:
		return "arm", nil
	case elf.EM_RISCV:
		return "riscv64", nil
	case elf.EM_PPC64:
		return "ppc64le", nil
	case elf.EM_S390:
		return "s390x", nil
	}
	return "", fmt.Errorf("unsupported ELF machine %v", f.Machine)
}

// imageBuilds caches derived image refs and serialises builds per key.
type imageBuilds struct {
	mu    sync.Mutex
	refs  map[string]string
	locks map[string]*sync.Mutex
}

func (b *imageBuilds) lock(key string) *sync.Mutex {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.locks == nil {
		b.locks, b.refs = map[string]*sync.Mutex{}, map[string]string{}
	}
	l := b.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		b.locks[key] = l
	}
	return l
}

func (b *imageBuilds) get(key string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refs[key]
}

func (b *imageBuilds) put(key, ref string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refs[key] = ref
}

// errSupervisorUnusable marks a base image the supervisor cannot run in; the
// sandbox then uses the plain path.
var errSupervisorUnusable = errors.New("supervisor unusable with this image")

// supervisedImage returns the derived image of base (base + supervisor at
// SupervisorPath), building it through the Engine's build API (classic
// builder, no registry, no bind mount: the binary travels in the build
// context) when the Engine does not have it yet. Derived images are tagged
// sandboxctl/supervised:<sha256(base image id, binary hash)[:12]>.
// building is called when a build begins; its end func gets the build's
// outcome.
func (m *DockerEngine) supervisedImage(ctx context.Context, base string, building func() (end func(error))) (_ string, err error) {
	var endBuild func(error)
	defer func() {
		if endBuild != nil {
			endBuild(err)
		}
	}()
	sup := m.sup
	insp, err := m.cli.ImageInspect(ctx, base)
	if err != nil {
		if isNotFound(err) {
			return "", &imageMissingError{image: base, err: err}
		}
		return "", m.classify("inspect image "+base, err)
	}
	if arch := insp.Architecture; arch != "" && arch != sup.arch {
		return "", fmt.Errorf("%w: image %s is %s, the supervisor binary is %s", errSupervisorUnusable, base, arch, sup.arch)
	}
	if insp.Os != "" && insp.Os != "linux" {
		return "", fmt.Errorf("%w: image %s is for %s", errSupervisorUnusable, base, insp.Os)
	}
	sum := sha256.Sum256([]byte(insp.ID + "\n" + sup.hash))
	key := hex.EncodeToString(sum[:])[:12]
	ref := SupervisedRepo + ":" + key
	if r := m.images.get(key); r != "" {
		return r, nil
	}
	l := m.images.lock(key)
	l.Lock()
	defer l.Unlock()
	if r := m.images.get(key); r != "" {
		return r, nil
	}
	if _, err := m.cli.ImageInspect(ctx, ref); err == nil {
		m.images.put(key, ref)
		return ref, nil
	}
	buildCtx, err := supervisedContext(insp.ID, sup.data)
	if err != nil {
		return "", err
	}
	buildStart := time.Now()
	endBuild = building()
	res, err := m.cli.ImageBuild(ctx, buildCtx, client.ImageBuildOptions{
		Tags:        []string{ref},
		Remove:      true,
		ForceRemove: true,
		NetworkMode: "none",
		Version:     build.BuilderV1,
		Labels:      map[string]string{LabelSupervisor: sup.hash, LabelSupervisorBase: insp.ID},
	})
	if err != nil {
		return "", m.classify("build supervised image for "+base, err)
	}
	defer res.Body.Close()
	if err := readBuildStream(res.Body); err != nil {
		return "", fmt.Errorf("build supervised image for %s: %w", base, err)
	}
	if _, err := m.cli.ImageInspect(ctx, ref); err != nil {
		return "", fmt.Errorf("build supervised image for %s: %s missing after the build: %w", base, ref, err)
	}
	if m.obs != nil {
		m.obs.ImageBuilt(time.Since(buildStart))
	}
	m.logf("sandbox: built %s (%s + supervisor %s)", ref, base, short(sup.hash))
	m.images.put(key, ref)
	return ref, nil
}

// supervisedContext is the tar build context: a Dockerfile and the binary.
func supervisedContext(baseID string, bin []byte) (io.Reader, error) {
	dockerfile := fmt.Sprintf("FROM %s\nCOPY %s %s\n", baseID, SupervisorBinaryName, SupervisorPath)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {SupervisorBinaryName, 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("build context: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	return &buf, nil
}

// readBuildStream drains the build's JSON message stream and returns the
// first error it reports.
func readBuildStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("build output: %w", err)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
		if msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
	}
}

// PruneSupervisedImages removes derived images (sandboxctl/supervised:*)
// built for another supervisor binary than this Manager's more than ten
// minutes ago (another process may be about to use a fresh one), and
// returns their tags. Images a container still uses are kept (the Engine
// refuses).
func (m *DockerEngine) PruneSupervisedImages(ctx context.Context) ([]string, error) {
	list, err := m.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("label", LabelSupervisor)})
	if err != nil {
		return nil, m.classify("list supervised images", err)
	}
	var removed []string
	for _, img := range list.Items {
		if (m.sup != nil && img.Labels[LabelSupervisor] == m.sup.hash) || time.Since(time.Unix(img.Created, 0)) < 10*time.Minute {
			continue
		}
		for _, tag := range img.RepoTags {
			if !strings.HasPrefix(tag, SupervisedRepo+":") {
				continue
			}
			if _, err := m.cli.ImageRemove(ctx, tag, client.ImageRemoveOptions{PruneChildren: true}); err == nil {
				removed = append(removed, tag)
			}
		}
	}
	return removed, nil
}
