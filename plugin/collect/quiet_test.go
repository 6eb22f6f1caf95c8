package collect

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// After a port-forward, client-go's second close of its listener is not
// logged; any other unhandled error still is.
func TestQuietClosedListeners(t *testing.T) {
	var buf bytes.Buffer
	klog.LogToStderr(false) // else klog writes to stderr only
	klog.SetOutput(&buf)
	defer func() { klog.SetOutput(nil); klog.LogToStderr(true) }()
	quietOnce.Do(quietClosedListeners)
	ctx := context.Background()
	closed := &net.OpError{Op: "close", Net: "tcp4", Err: net.ErrClosed}
	utilruntime.HandleErrorWithContext(ctx, closed, "Error closing listener")
	utilruntime.HandleErrorWithContext(ctx, errors.New("connection reset"), "Error closing listener")
	utilruntime.HandleErrorWithContext(ctx, closed, "Unhandled error from the forwarder")
	klog.Flush()
	out := buf.String()
	// (klog writes an error to each of its severities' outputs: here the
	// one buffer, three times.)
	if strings.Contains(out, `"Error closing listener" err="close tcp4: use of closed`) {
		t.Errorf("logged:\n%s\nwant no closed listener", out)
	}
	if !strings.Contains(out, "connection reset") || !strings.Contains(out, "Unhandled error from the forwarder") {
		t.Errorf("logged:\n%s\nwant the other errors still logged", out)
	}
}
