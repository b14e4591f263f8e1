"""The group coordinator as logic: requests and `now_ms` in; responses, records, deadlines out."""
