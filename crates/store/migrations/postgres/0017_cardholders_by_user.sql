-- A user's cardholder at a subprovider (`cardholders::get_for_user`: every card issue
-- reads it, twice with KYC data, and so does cardholders/create) and the list's filter by
-- external_user_id found it by walking every cardholder of the project through
-- `cardholders_project_created`: 3,000 rows a lookup in the benchmark, a project's
-- whole population in production.
CREATE INDEX cardholders_external_user ON cardholders(project_id, external_user_id, subprovider_code);
