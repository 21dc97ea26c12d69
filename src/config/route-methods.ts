/** The methods a route may allow, as the schema names them and the cross-checks compare them. */
export const ROUTE_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
