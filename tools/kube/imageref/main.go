// Command imageref parses image references with the kubelet's own parser (k8s.io/kubernetes/pkg/util/parsers:
// distribution/reference's ParseNormalizedNamed, at the kubelet's pin), the oracle renderer/imageref.py is tested
// against (tests/renderer/test_imageref.py). Each stdin line is a JSON string; each stdout line a JSON object:
// {"repository", "tag", "digest"} for a reference the kubelet pulls, {"error"} for one it refuses
// (the Pod then waits in InvalidImageName).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/kubernetes/pkg/util/parsers"
)

type result struct {
	Repository string `json:"repository,omitempty"`
	Tag        string `json:"tag,omitempty"`
	Digest     string `json:"digest,omitempty"`
	Error      string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var ref string
		if err := json.Unmarshal(in.Bytes(), &ref); err != nil {
			fmt.Fprintf(os.Stderr, "imageref: a line is not a JSON string: %v\n", err)
			os.Exit(2)
		}
		var r result
		repository, tag, digest, err := parsers.ParseImageName(ref)
		if err != nil {
			r.Error = err.Error()
		} else {
			r = result{Repository: repository, Tag: tag, Digest: digest}
		}
		if err := out.Encode(r); err != nil {
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "imageref: %v\n", err)
		os.Exit(2)
	}
}
