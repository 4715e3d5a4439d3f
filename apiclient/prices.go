package apiclient

import (
	"context"
	"net/http"
	"time"
)

// Price is one version of a kind's price on the server's price list.
type Price struct {
	// Kind names what is sold.
	Kind string `json:"kind"`
	// Version counts the kind's prices from 1.
	Version int `json:"version"`
	// Unit is what the kind is sold by: "job" (a fixed price) or "gpu_second" (metered).
	Unit string `json:"unit"`
	// UnitPrice is the credits one unit costs.
	UnitPrice int64 `json:"unit_price"`
	// MaxUnits is the most units one job may use, which its charge holds (1 for "job").
	MaxUnits int64 `json:"max_units"`
	// Memo says why the price was set.
	Memo string `json:"memo"`
	// CreatedAt is when this version was set.
	CreatedAt time.Time `json:"created_at"`
}

// Hold is what a job of this price holds when it asks for no smaller maximum of units.
func (p Price) Hold() int64 { return p.UnitPrice * p.MaxUnits }

// Prices reads the price list (GET /v1/prices): each kind's current price, what a job submitted
// now holds and costs. Any key may read it.
func (c *Client) Prices(ctx context.Context) ([]Price, error) {
	var list struct {
		Prices []Price `json:"prices"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/prices", nil, nil, &list, http.StatusOK)
	return list.Prices, err
}

// PriceHistory reads every version of a kind's price, oldest first (GET /v1/prices/{kind}); a
// job's PriceVersion names the one it was charged at. A kind never priced is an *APIError with
// code unknown_kind.
func (c *Client) PriceHistory(ctx context.Context, kind string) ([]Price, error) {
	k, err := pathID("kind", kind)
	if err != nil {
		return nil, err
	}
	var history struct {
		Versions []Price `json:"versions"`
	}
	err = c.call(ctx, http.MethodGet, "/v1/prices/"+k, nil, nil, &history, http.StatusOK)
	return history.Versions, err
}
