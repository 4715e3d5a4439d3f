package apiclient

import (
	"context"
	"net/http"

	"github.com/jobbill/jobbill/apitype"
)

// Prices reads the price list (GET /v1/prices): each kind's current price, what a job submitted
// now holds and costs. Any key may read it.
func (c *Client) Prices(ctx context.Context) ([]apitype.Price, error) {
	var list apitype.PriceList
	err := c.call(ctx, http.MethodGet, "/v1/prices", nil, nil, &list, http.StatusOK)
	return list.Prices, err
}

// PriceHistory reads every version of a kind's price, oldest first (GET /v1/prices/{kind}); a
// job's PriceVersion names the one it was charged at. A kind never priced is an *APIError with
// code unknown_kind.
func (c *Client) PriceHistory(ctx context.Context, kind string) ([]apitype.Price, error) {
	k, err := pathID("kind", kind)
	if err != nil {
		return nil, err
	}
	var history apitype.PriceHistory
	err = c.call(ctx, http.MethodGet, "/v1/prices/"+k, nil, nil, &history, http.StatusOK)
	return history.Versions, err
}
