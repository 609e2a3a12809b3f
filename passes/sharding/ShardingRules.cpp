// Placeholder: sharding rules are being written (issue 5).
