-- App prices follow an image's bytes (docs/decisions/0059-app-prices.md):
-- an image's config digest, recorded when it is verified (the config
-- descriptor of its manifest, or of an index's linux/amd64 manifest), so
-- that another manifest of the same config — an index's per-arch
-- manifest, a re-pushed or re-packed copy — is priced as the app's image
-- is. '' until the image is verified (again) after this migration.
ALTER TABLE images ADD COLUMN config_digest text NOT NULL DEFAULT '';

-- apps.PricedImage looks images up by digest and by config digest on
-- every run, job create and queued job start.
CREATE INDEX images_digest ON images (digest);
CREATE INDEX images_config_digest ON images (config_digest) WHERE config_digest <> '';

-- billing.CreditFault sums an allocation's app charges after the fault.
CREATE INDEX app_charges_allocation ON app_charges (allocation_id, window_end);
