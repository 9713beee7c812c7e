package jupyter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
)

// jupyter-server-documents' outputs service (OutputProcessor.use_outputs_service): a notebook
// it loads holds placeholders instead of outputs, {"output_type", "metadata": {"url":
// "/api/outputs/{file_id}/{cell_id}/{index}.output"}}, and the service answers each URL with the
// output (outputs/handlers.py :: OutputsAPIHandler.get). The URL has no base_url.

// outputURL is the only shape of placeholder URL the sidecar follows: the outputs service's,
// nothing else of the server (a collaborator can write any metadata.url into a document).
var outputURL = regexp.MustCompile(`^/api/outputs/([a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12})/([A-Za-z0-9_-]+)/(0|[1-9][0-9]{0,6})\.output$`)

// ParseOutputURL splits an outputs-service placeholder URL into file id, cell id and index; ok
// is false for anything else.
func ParseOutputURL(u string) (fileID, cellID, index string, ok bool) {
	m := outputURL.FindStringSubmatch(u)
	if m == nil {
		return "", "", "", false
	}
	return m[1], m[2], m[3], true
}

// FetchOutput returns the output an outputs-service placeholder stands for, by its
// metadata.url (resolved against the server's base URL). Other URLs are refused.
func (c *Client) FetchOutput(ctx context.Context, placeholderURL string) (map[string]any, error) {
	fileID, cellID, index, ok := ParseOutputURL(placeholderURL)
	if !ok {
		return nil, fmt.Errorf("not an outputs-service URL: %.200q", placeholderURL)
	}
	var out map[string]any
	if _, err := c.do(ctx, http.MethodGet, c.endpoint("api", "outputs", fileID, cellID, index+".output"), nil, &out); err != nil {
		return nil, err
	}
	if _, ok := out["output_type"].(string); !ok {
		b, _ := json.Marshal(out)
		return nil, fmt.Errorf("GET %s: not an output: %.200s", placeholderURL, b)
	}
	return out, nil
}
