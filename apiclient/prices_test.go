package apiclient_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
)

// TestPricesAreReadFromTheServer checks the price calls: the price list and a kind's history are
// read as the server answers them (the hold a job of each kind takes is unit price × max units),
// and a kind never priced is an *APIError unknown_kind.
func TestPricesAreReadFromTheServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/prices":
			_, _ = w.Write([]byte(`{"prices":[{"kind":"render-4k","version":2,"unit":"job","unit_price":40,"max_units":1},` +
				`{"kind":"transcribe","version":1,"unit":"gpu_second","unit_price":2,"max_units":300,"memo":"launch"}]}`))
		case "/v1/prices/transcribe":
			_, _ = w.Write([]byte(`{"kind":"transcribe","versions":[{"kind":"transcribe","version":1,"unit":"gpu_second","unit_price":2,"max_units":300}]}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"code":"unknown_kind","message":"No price was ever set for this kind"}`))
		}
	}))
	defer srv.Close()
	c := &apiclient.Client{BaseURL: srv.URL, Key: "k"}
	ctx := context.Background()

	prices, err := c.Prices(ctx)
	require.NoError(t, err)
	require.Len(t, prices, 2)
	require.Equal(t, int64(40), prices[0].Hold())
	require.Equal(t, "gpu_second", prices[1].Unit)
	require.Equal(t, int64(600), prices[1].Hold())

	history, err := c.PriceHistory(ctx, "transcribe")
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.Equal(t, 1, history[0].Version)

	_, err = c.PriceHistory(ctx, "nothing")
	var ae *apiclient.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "unknown_kind", ae.Code)
}
