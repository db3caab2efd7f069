package envguard_test

import (
	"errors"
	"fmt"

	"github.com/sandboxctl/sandboxctl/envguard"
	"github.com/sandboxctl/sandboxctl/vocab"
)

func ExampleCheckRequest() {
	env := map[string]string{"LD_PRELOAD": "/tmp/malware.so", "MY_FLAG": "1"}

	err := envguard.CheckRequest(vocab.HostGateway, env)
	fmt.Println(err)
	fmt.Println(errors.Is(err, envguard.ErrRefused))
	var re *envguard.RefusedError
	if errors.As(err, &re) {
		fmt.Println(re.Key, re.Rule)
	}

	// Inside a sandbox the container is the boundary.
	fmt.Println(envguard.CheckRequest(vocab.HostSandbox, env))
	// Output:
	// env LD_PRELOAD refused: blocked everywhere (prefix LD_): loader and interpreter hooks can run code
	// true
	// LD_PRELOAD blocked-prefix
	// <nil>
}

func ExampleCheckRequest_several() {
	err := envguard.CheckRequest(vocab.HostNode, map[string]string{
		"PATH":            "/tmp/evil:/usr/bin",
		"GIT_SSH_COMMAND": "evil.sh",
	})
	fmt.Println(err)
	// Output:
	// env GIT_SSH_COMMAND refused: blocked everywhere: version-control hooks and settings can run commands or redirect the repository
	// env PATH refused: PATH may not be set by a request on this host: the host builds PATH from the login shell PATH and pathPrepend
}

func ExampleSanitizeInherited() {
	fmt.Println(envguard.SanitizeInherited([]string{
		"HOME=/home/u", "NODE_OPTIONS=--require /tmp/x.js", "TERM=xterm", "BASH_FUNC_ls%%=() { id; }",
	}))
	// Output: [HOME=/home/u TERM=xterm EDITOR=/bin/false GIT_EDITOR=/bin/false LESSSECURE=1 PAGER=/bin/cat VISUAL=/bin/false]
}

func ExampleBuildPath() {
	fmt.Println(envguard.BuildPath("/usr/local/bin:/usr/bin::.:/bin:/usr/bin", []string{"/opt/tools/bin", "/usr/bin"}))
	// Output: /opt/tools/bin:/usr/bin:/usr/local/bin:/bin
}
