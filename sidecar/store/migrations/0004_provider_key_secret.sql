-- A provider's literal API key moves to the secret store (the OS keystore or the 0600 file): the row
-- keeps the name of its entry there (provider:<id>), and api_key only ever holds a ${VAR} reference.
-- The keys already stored in plain text are moved by the sidecar at start-up (it needs the store,
-- which SQL cannot reach): ProviderService.move_keys_to_store.
ALTER TABLE providers ADD COLUMN api_key_secret TEXT;
