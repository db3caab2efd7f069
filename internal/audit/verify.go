package audit

import (
	"bufio"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Problem is the first bad line Verify found.
type Problem struct {
	Segment string // file name
	Line    int    // 1-based; 0 for a problem of the segment itself
	Err     error
}

func (p *Problem) Error() string {
	if p.Line == 0 {
		return fmt.Sprintf("%s: %v", p.Segment, p.Err)
	}
	return fmt.Sprintf("%s line %d: %v", p.Segment, p.Line, p.Err)
}

// Report is what Verify found.
type Report struct {
	Segments int
	Records  int64
	// FirstSeq and LastSeq are the sequence numbers of the first and last
	// records held; Anchor is the prev hash of the first record held (not
	// "" when older segments were removed by audit.maxBytes).
	FirstSeq, LastSeq int64
	Anchor            string
	LastHash          string
	// Signed counts the segments whose signature was checked.
	Signed int
	// Problem is the first bad line; nil when the log is intact.
	Problem *Problem
}

// Verify reads every segment of dir in order and checks each line: it
// parses, its content matches its own hash, its prev is the hash of the
// record before (across segments), and its seq is one more. The segments'
// numbers must follow each other. With pub, each segment's signature file,
// where there is one, must hold a valid signature of its last hash;
// requireSigned makes a missing signature of a closed segment a problem.
func Verify(dir string, pub ed25519.PublicKey, requireSigned bool) (Report, error) {
	segs, err := segments(dir)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	rep.Segments = len(segs)
	prev, seq := "", int64(0)
	for i, s := range segs {
		bad := func(line int, err error) (Report, error) {
			rep.Problem = &Problem{Segment: s.name, Line: line, Err: err}
			return rep, nil
		}
		if i > 0 && s.num != segs[i-1].num+1 {
			return bad(0, fmt.Errorf("segment %s is missing (removed)", SegmentName(segs[i-1].num+1)))
		}
		f, err := os.Open(filepath.Join(dir, s.name))
		if err != nil {
			return rep, fmt.Errorf("audit: %w", err)
		}
		br := bufio.NewReaderSize(f, 64<<10)
		line := 0
		for {
			data, rerr := br.ReadBytes('\n')
			if len(data) == 0 && errors.Is(rerr, io.EOF) {
				break
			}
			line++
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				_ = f.Close()
				return rep, fmt.Errorf("audit: %s: %w", s.name, rerr)
			}
			if data[len(data)-1] != '\n' {
				_ = f.Close()
				return bad(line, errors.New("the last line is cut (no newline at its end)"))
			}
			data = data[:len(data)-1]
			hash, err := unseal(data)
			if err != nil {
				_ = f.Close()
				return bad(line, err)
			}
			var r Record
			if err := json.Unmarshal(data, &r); err != nil {
				_ = f.Close()
				return bad(line, fmt.Errorf("does not parse: %w", err))
			}
			first := rep.Records == 0
			switch {
			case first && r.Prev != "" && s.num == 1:
				_ = f.Close()
				return bad(line, errors.New("the first record of the log names a previous one"))
			case first:
				rep.Anchor, rep.FirstSeq = r.Prev, r.Seq
			case r.Prev != prev:
				_ = f.Close()
				return bad(line, fmt.Errorf("prev %.12s… is not the hash of the record before (%.12s…): a record before it was removed, moved or edited", r.Prev, prev))
			case r.Seq != seq+1:
				_ = f.Close()
				return bad(line, fmt.Errorf("seq %d after %d", r.Seq, seq))
			}
			prev, seq = hash, r.Seq
			rep.Records++
		}
		_ = f.Close()
		if pub != nil {
			ok, err := checkSignature(filepath.Join(dir, s.name), pub, prev)
			switch {
			case err != nil:
				return bad(0, err)
			case ok:
				rep.Signed++
			case requireSigned && i < len(segs)-1:
				return bad(0, errors.New("the segment is not signed"))
			}
		}
	}
	rep.LastSeq, rep.LastHash = seq, prev
	return rep, nil
}

// sigExt is the extension of a segment's signature file.
const sigExt = ".sig"

// signature is the content of a .sig file.
type signature struct {
	LastHash  string    `json:"lastHash"`
	Signature string    `json:"signature"` // base64 ed25519 over signedMessage
	Time      time.Time `json:"time"`
}

func signedMessage(segment, lastHash string) []byte {
	return []byte("sandboxctl-audit-v1\n" + segment + "\n" + lastHash + "\n")
}

func writeSignature(segPath string, key []byte, lastHash string) error {
	priv := ed25519.PrivateKey(key)
	sig := ed25519.Sign(priv, signedMessage(filepath.Base(segPath), lastHash))
	data, err := json.Marshal(signature{LastHash: lastHash, Signature: base64.StdEncoding.EncodeToString(sig), Time: time.Now().UTC()})
	if err != nil {
		return err
	}
	tmp := segPath + sigExt + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	return os.Rename(tmp, segPath+sigExt)
}

// checkSignature reports whether segPath has a signature file (false
// without one) and fails when it does not sign lastHash with pub.
func checkSignature(segPath string, pub ed25519.PublicKey, lastHash string) (bool, error) {
	data, err := os.ReadFile(segPath + sigExt)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var s signature
	if err := json.Unmarshal(data, &s); err != nil {
		return false, fmt.Errorf("signature file does not parse: %w", err)
	}
	if s.LastHash != lastHash {
		return false, fmt.Errorf("the signature names last hash %.12s… but the segment ends with %.12s… (records after the signed one were added or removed)", s.LastHash, lastHash)
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || !ed25519.Verify(pub, signedMessage(filepath.Base(segPath), lastHash), sig) {
		return false, errors.New("the signature does not verify with the public key")
	}
	return true, nil
}
