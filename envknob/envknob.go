// Package envknob declares every environment variable sandboxctl reads or
// sets, each once, with what it does (in the style of tailscale's
// envknob). The variables are read at the edge only: the binaries' main
// functions and the commands that start a daemon pass a getenv function
// down, so everything below takes plain values. Standard library only: a
// leaf that even the static in-container supervisor may import.
//
// docs/configuration.md ("Environment variables") lists every knob of All;
// TestKnobsDocumented keeps them equal.
package envknob

// Knob is the name of one environment variable.
type Knob string

// The knobs. Each one's documentation is in All.
const (
	State                 Knob = "SANDBOXCTL_STATE"
	DaemonBinary          Knob = "SANDBOXCTLD"
	RunTag                Knob = "SANDBOXCTL_RUN"
	Token                 Knob = "SANDBOXCTL_TOKEN"
	NodeToken             Knob = "SANDBOXCTL_NODE_TOKEN"
	ApproverToken         Knob = "SANDBOXCTL_APPROVER_TOKEN"
	SandboxLabels         Knob = "SANDBOXCTL_SANDBOX_LABELS"
	Supervisor            Knob = "SANDBOXCTL_SUPERVISOR"
	YieldMs               Knob = "SANDBOXCTL_YIELD_MS"
	MaxOutputChars        Knob = "SANDBOXCTL_MAX_OUTPUT_CHARS"
	PendingMaxOutputChars Knob = "SANDBOXCTL_PENDING_MAX_OUTPUT_CHARS"
	JobTTLMs              Knob = "SANDBOXCTL_JOB_TTL_MS"
	SkipDocker            Knob = "SANDBOXCTL_SKIP_DOCKER"
	TestSandboxImage      Knob = "SANDBOXCTL_TEST_SANDBOX_IMAGE"
	DockerHost            Knob = "DOCKER_HOST"
)

// The PI_BASH_* aliases of the config overrides (the name of the tool
// sandboxctl's exec and process follow); the SANDBOXCTL_ name wins.
const (
	YieldMsAlias               Knob = "PI_BASH_YIELD_MS"
	MaxOutputCharsAlias        Knob = "PI_BASH_MAX_OUTPUT_CHARS"
	PendingMaxOutputCharsAlias Knob = "PI_BASH_PENDING_MAX_OUTPUT_CHARS"
	JobTTLMsAlias              Knob = "PI_BASH_JOB_TTL_MS"
)

// SupervisorOff, as the value of Supervisor, keeps the daemon's sandboxes
// on the plain exec path (no supervisor binary).
const SupervisorOff = "off"

// Info documents one knob.
type Info struct {
	Knob Knob
	// Alias is another name read when Knob is unset ("" = none).
	Alias Knob
	// Doc says who reads it and what it does.
	Doc string
}

// All documents every knob, in the order docs/configuration.md lists them.
func All() []Info {
	return []Info{
		{Knob: State, Doc: "the state directory when --state is not given (before the config's state and ~/.sandboxctl)"},
		{Knob: DaemonBinary, Doc: "the sandboxctld binary that sandboxctl starts and hands its runtime commands to (default: next to sandboxctl, then on PATH)"},
		{Knob: RunTag, Doc: "set by sandboxctl on every command it runs (the command's session id); kills find a whole tree by it, and a process that has it is never taken for a person (approvals, console login) nor starts a daemon"},
		{Knob: Token, Doc: "serve: the tool token of the TCP listener when --token is not given"},
		{Knob: NodeToken, Doc: "serve and node: the token node agents present when --node-token is not given"},
		{Knob: ApproverToken, Doc: "serve: the approver token of the TCP listener when --approver-token is not given"},
		{Knob: SandboxLabels, Doc: "serve: extra labels (KEY=VALUE,...) put on every sandbox container"},
		{Knob: Supervisor, Doc: "serve: the sandboxctl-supervisor binary put into sandboxes (default: next to sandboxctld); \"off\" runs commands through the Engine's plain exec"},
		{Knob: YieldMs, Alias: YieldMsAlias, Doc: "overrides exec.backgroundMs"},
		{Knob: MaxOutputChars, Alias: MaxOutputCharsAlias, Doc: "overrides exec.maxOutputChars"},
		{Knob: PendingMaxOutputChars, Alias: PendingMaxOutputCharsAlias, Doc: "overrides exec.pendingMaxOutputChars"},
		{Knob: JobTTLMs, Alias: JobTTLMsAlias, Doc: "overrides exec.cleanupMs"},
		{Knob: DockerHost, Doc: "the Docker client's own variable: the Engine the daemon talks to; the CLI reaches only a daemon of the same Engine"},
		{Knob: SkipDocker, Doc: "tests only: 1 skips the tests that need a Docker Engine (outside CI)"},
		{Knob: TestSandboxImage, Doc: "tests only: the image with Node the Node egress tests of package sandbox run in instead of sandboxctl/sandbox:bookworm (a copy built with SANDBOX_IMAGE=... images/build.sh sandbox)"},
	}
}

// Get reads k through getenv, then its alias when k is unset or empty.
func (k Knob) Get(getenv func(string) string) string {
	v, _ := k.GetFrom(getenv)
	return v
}

// GetFrom is Get that also returns the name the value came from.
func (k Knob) GetFrom(getenv func(string) string) (value string, from Knob) {
	if v := getenv(string(k)); v != "" {
		return v, k
	}
	for _, in := range All() {
		if in.Knob == k && in.Alias != "" {
			if v := getenv(string(in.Alias)); v != "" {
				return v, in.Alias
			}
		}
	}
	return "", k
}

// String is the variable's name.
func (k Knob) String() string { return string(k) }
