/* The built-in credential catalog, written by us from the providers' public
 * token formats. Each pattern is compiled PCRE2_ANCHORED and tried only where
 * one of its literal triggers occurs (at trigger - back), so patterns start
 * at their trigger and use bounded quantifiers: cost per try is bounded by the
 * secret's length. If a pattern has a capture group, group 1 is the secret and
 * the rest (key name, scheme, host) is kept: "API_KEY=[REDACTED]". */
#include "redact_internal.h"

/* Building blocks for "name = value" rules. */
#define NAME_TAIL "[\\w.-]{0,30}?"
/* =, :, :=, =>, optionally after the closing quote of a JSON/YAML key,
 * also when the JSON itself sits escaped inside a string (\"key\": \"v\"). */
#define ASSIGN "(?:\\\\?[\"'])?[ \\t]*(?::=|=>|:|=)[ \\t]*"
/* A value: double-quoted, single-quoted or bare. Group 1 in every branch. A
 * bare value followed by "(" is a function call, not a secret. */
#define VALUE(lo) "(?|\\\\?\"([^\"\\r\\n]{" lo ",256}?)\\\\?\"|'([^'\\r\\n]{" lo ",256}?)'" \
                  "|([^\\s\"'`,;&|<>(){}\\[\\]\\\\]{" lo ",256}+)(?!\\())"
#define QUOTE_OPT "\\\\?[\"']?"
#define TOKEN_END(cls) "(?!" cls ")"

#define B CB_TRIG_BOUNDARY
#define C CB_TRIG_CASE
#define A CB_TRIG_ASSIGN

const cb_redact_rule_def cb_redact_catalog[] = {
    /* ---- cloud ---------------------------------------------------------- */
    {"aws-access-key-id", "AWS access key id (AKIA/ASIA/ABIA/ACCA + 16)",
     "(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}" TOKEN_END("[A-Za-z0-9]"),
     {"AKIA", "ASIA", "ABIA", "ACCA"}, 0, CB_GATE_NONE, B | C},
    {"aws-secret-access-key", "AWS secret access key next to its key name",
     "(?i)(?:aws" NAME_TAIL "(?:secret|sak)" NAME_TAIL "|secret_?access_?key)" ASSIGN QUOTE_OPT
     "([A-Za-z0-9/+]{40})" TOKEN_END("[A-Za-z0-9/+=]"),
     {"aws", "secretaccesskey", "secret_access_key"}, 0, CB_GATE_PLACEHOLDER, B | A},
    {"aws-session-token", "AWS session token next to its key name",
     "(?i)(?:aws_session_token|sessiontoken|x-amz-security-token)" ASSIGN QUOTE_OPT "([A-Za-z0-9/+=]{100,4096})",
     {"aws_session_token", "sessiontoken", "x-amz-security-token"}, 0, CB_GATE_NONE, B | A},
    {"gcp-api-key", "Google/GCP API key (AIza...)",
     "AIza[0-9A-Za-z_-]{35}" TOKEN_END("[0-9A-Za-z_-]"), {"AIza"}, 0, CB_GATE_NONE, B | C},
    {"google-oauth-client-secret", "Google OAuth client secret (GOCSPX-)",
     "GOCSPX-[0-9A-Za-z_-]{28}" TOKEN_END("[0-9A-Za-z_-]"), {"GOCSPX-"}, 0, CB_GATE_NONE, B | C},
    {"google-oauth-access-token", "Google OAuth access token (ya29.)",
     "ya29\\.[0-9A-Za-z_-]{20,2048}", {"ya29."}, 0, CB_GATE_NONE, B | C},
    {"google-oauth-refresh-token", "Google OAuth refresh token (1//0...)",
     "1//0[0-9A-Za-z_-]{40,512}", {"1//0"}, 0, CB_GATE_NONE, B | C},
    {"gcp-service-account-key-id", "GCP service account JSON private_key_id",
     "\"private_key_id\"\\s*:\\s*\"([0-9a-f]{40})\"", {"\"private_key_id\""}, 0, CB_GATE_NONE, C},
    {"azure-storage-account-key", "Azure storage account key (AccountKey=...==)",
     "(?i)accountkey\\s*=\\s*([A-Za-z0-9+/]{86}==)", {"accountkey"}, 0, CB_GATE_NONE, B | A},
    {"azure-shared-access-key", "Azure Service Bus/Event Hubs SharedAccessKey",
     "(?i)sharedaccesskey\\s*=\\s*([A-Za-z0-9+/]{20,120}=*)", {"sharedaccesskey"}, 0, CB_GATE_PLACEHOLDER, B | A},
    {"azure-sas-signature", "Azure SAS token signature (sig= in a URL query)",
     "(?<=[?&])sig=([A-Za-z0-9%+/]{30,200}(?:%3D|=){0,2})", {"sig="}, 0, CB_GATE_NONE, C},
    {"azure-ad-client-secret", "Azure AD (Entra) client secret (xxx8Q~...)",
     "(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}" TOKEN_END("[A-Za-z0-9_~.-]"),
     {"Q~"}, 4, CB_GATE_NONE, C},
    {"heroku-api-key", "Heroku API key (HRKU- or a UUID next to heroku)",
     "(?:HRKU-[A-Za-z0-9_-]{60}|(?i)heroku" NAME_TAIL "(?:key|token|secret)" NAME_TAIL ASSIGN QUOTE_OPT
     "([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}))",
     {"HRKU-", "heroku"}, 0, CB_GATE_NONE, B},
    {"digitalocean-token", "DigitalOcean token (dop_v1_/doo_v1_/dor_v1_)",
     "do[por]_v1_[a-f0-9]{64}", {"dop_v1_", "doo_v1_", "dor_v1_"}, 0, CB_GATE_NONE, B | C},
    {"databricks-token", "Databricks personal access token (dapi...)",
     "dapi[a-f0-9]{32}(?:-[0-9])?" TOKEN_END("[A-Za-z0-9]"), {"dapi"}, 0, CB_GATE_NONE, B | C},
    {"vault-token", "HashiCorp Vault token (hvs./hvb.)",
     "hv[sb]\\.[A-Za-z0-9_-]{24,300}", {"hvs.", "hvb."}, 0, CB_GATE_NONE, B | C},
    {"supabase-token", "Supabase access token (sbp_)",
     "sbp_[a-f0-9]{40}", {"sbp_"}, 0, CB_GATE_NONE, B | C},
    /* ---- version control ------------------------------------------------ */
    {"github-pat", "GitHub classic personal access token (ghp_)",
     "ghp_[A-Za-z0-9]{36}" TOKEN_END("[A-Za-z0-9_]"), {"ghp_"}, 0, CB_GATE_NONE, B | C},
    {"github-oauth-token", "GitHub OAuth access token (gho_)",
     "gho_[A-Za-z0-9]{36}" TOKEN_END("[A-Za-z0-9_]"), {"gho_"}, 0, CB_GATE_NONE, B | C},
    {"github-app-token", "GitHub App user/installation token (ghu_/ghs_)",
     "gh[us]_[A-Za-z0-9]{36}" TOKEN_END("[A-Za-z0-9_]"), {"ghu_", "ghs_"}, 0, CB_GATE_NONE, B | C},
    {"github-refresh-token", "GitHub refresh token (ghr_)",
     "ghr_[A-Za-z0-9]{36,76}" TOKEN_END("[A-Za-z0-9_]"), {"ghr_"}, 0, CB_GATE_NONE, B | C},
    {"github-fine-grained-pat", "GitHub fine-grained personal access token (github_pat_)",
     "github_pat_[A-Za-z0-9_]{60,255}", {"github_pat_"}, 0, CB_GATE_NONE, B | C},
    {"gitlab-pat", "GitLab personal/project/group access token (glpat-)",
     "glpat-[A-Za-z0-9_-]{20,64}", {"glpat-"}, 0, CB_GATE_NONE, B | C},
    {"gitlab-pipeline-trigger-token", "GitLab pipeline trigger token (glptt-)",
     "glptt-[0-9a-f]{40}" TOKEN_END("[0-9a-f]"), {"glptt-"}, 0, CB_GATE_NONE, B | C},
    {"gitlab-runner-token", "GitLab runner authentication/registration token",
     "(?:glrt-|GR1348941)[A-Za-z0-9_-]{20,64}", {"glrt-", "GR1348941"}, 0, CB_GATE_NONE, B | C},
    /* ---- chat / SaaS ---------------------------------------------------- */
    {"slack-bot-token", "Slack bot token (xoxb-)",
     "xoxb-[0-9]{8,14}-[0-9]{8,14}-[A-Za-z0-9]{20,40}", {"xoxb-"}, 0, CB_GATE_NONE, B | C},
    {"slack-user-token", "Slack user token (xoxp-)",
     "xoxp-[0-9]{8,14}(?:-[0-9]{8,14}){1,2}-[A-Za-z0-9]{20,64}", {"xoxp-"}, 0, CB_GATE_NONE, B | C},
    {"slack-app-token", "Slack app-level token (xapp-)",
     "xapp-[0-9]-[A-Z0-9]{8,14}-[0-9]{8,14}-[A-Za-z0-9]{32,80}", {"xapp-"}, 0, CB_GATE_NONE, B | C},
    {"slack-webhook-url", "Slack incoming webhook / workflow URL path",
     "hooks\\.slack\\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/+-]{20,160})",
     {"hooks.slack.com/"}, 0, CB_GATE_NONE, 0},
    {"stripe-secret-key", "Stripe secret key (sk_live_/sk_test_)",
     "sk_(?:live|test)_[0-9A-Za-z]{16,247}", {"sk_live_", "sk_test_"}, 0, CB_GATE_NONE, B | C},
    {"stripe-restricted-key", "Stripe restricted key (rk_live_/rk_test_)",
     "rk_(?:live|test)_[0-9A-Za-z]{16,247}", {"rk_live_", "rk_test_"}, 0, CB_GATE_NONE, B | C},
    {"stripe-webhook-secret", "Stripe webhook signing secret (whsec_)",
     "whsec_[A-Za-z0-9+/=]{24,100}", {"whsec_"}, 0, CB_GATE_NONE, B | C},
    {"twilio-api-key", "Twilio API key SID (SK + 32 hex)",
     "SK[0-9a-fA-F]{32}" TOKEN_END("[0-9A-Za-z]"), {"SK"}, 0, CB_GATE_NONE, B | C},
    {"twilio-auth-token", "Twilio auth token next to a twilio key name",
     "(?i)twilio" NAME_TAIL "(?:auth|token|secret)" NAME_TAIL ASSIGN QUOTE_OPT "([0-9a-f]{32})" TOKEN_END("[0-9A-Za-z]"),
     {"twilio"}, 0, CB_GATE_NONE, B | A},
    {"sendgrid-api-key", "SendGrid API key (SG.xxx.yyy)",
     "SG\\.[A-Za-z0-9_-]{22}\\.[A-Za-z0-9_-]{43}" TOKEN_END("[A-Za-z0-9_-]"), {"SG."}, 0, CB_GATE_NONE, B | C},
    {"mailgun-api-key", "Mailgun API key (key- + 32 hex)",
     "key-[0-9a-f]{32}" TOKEN_END("[0-9A-Za-z]"), {"key-"}, 0, CB_GATE_NONE, B | C},
    {"shopify-token", "Shopify access/custom app/partner token or shared secret",
     "shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" TOKEN_END("[A-Za-z0-9]"),
     {"shpat_", "shpca_", "shppa_", "shpss_"}, 0, CB_GATE_NONE, B | C},
    {"telegram-bot-token", "Telegram bot token (the secret after <bot id>:)",
     "(?<=[0-9]{8}):(AA[0-9A-Za-z_-]{33})" TOKEN_END("[0-9A-Za-z_-]"), {":AA"}, 0, CB_GATE_NONE, C},
    {"discord-bot-token", "Discord bot token next to a discord key name",
     "(?i)discord" NAME_TAIL "(?:token|bot|secret)" NAME_TAIL ASSIGN QUOTE_OPT
     "((?-i)[MNO][A-Za-z0-9_-]{23,27}\\.[A-Za-z0-9_-]{6}\\.[A-Za-z0-9_-]{27,40})",
     {"discord"}, 0, CB_GATE_NONE, B | A},
    {"discord-webhook-url", "Discord webhook URL token",
     "discord(?:app)?\\.com/api/webhooks/[0-9]{5,30}/([A-Za-z0-9_-]{30,100})",
     {"discord.com/api/webhooks/", "discordapp.com/api/webhooks/"}, 0, CB_GATE_NONE, 0},
    {"atlassian-api-token", "Atlassian API token (ATATT3)",
     "ATATT3[A-Za-z0-9_=-]{150,300}", {"ATATT3"}, 0, CB_GATE_NONE, B | C},
    {"linear-api-key", "Linear API key (lin_api_)",
     "lin_api_[A-Za-z0-9]{40}", {"lin_api_"}, 0, CB_GATE_NONE, B | C},
    {"postman-api-key", "Postman API key (PMAK-)",
     "PMAK-[a-f0-9]{24}-[a-f0-9]{34}", {"PMAK-"}, 0, CB_GATE_NONE, B | C},
    {"docker-hub-pat", "Docker Hub personal access token (dckr_pat_)",
     "dckr_pat_[A-Za-z0-9_-]{27,40}", {"dckr_pat_"}, 0, CB_GATE_NONE, B | C},
    {"grafana-token", "Grafana service account / cloud token (glsa_/glc_)",
     "(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,400}={0,2})",
     {"glsa_", "glc_"}, 0, CB_GATE_NONE, B | C},
    {"new-relic-user-key", "New Relic user API key (NRAK-)",
     "NRAK-[A-Z0-9]{27}", {"NRAK-"}, 0, CB_GATE_NONE, B | C},
    {"sentry-token", "Sentry auth token (sntrys_/sntryu_)",
     "sntry[su]_[A-Za-z0-9+/=_-]{40,400}", {"sntrys_", "sntryu_"}, 0, CB_GATE_NONE, B | C},
    {"square-token", "Square access token / OAuth secret (sq0atp-/sq0csp-)",
     "sq0(?:atp|csp)-[0-9A-Za-z_-]{22,43}", {"sq0atp-", "sq0csp-"}, 0, CB_GATE_NONE, B | C},
    {"age-secret-key", "age encryption secret key",
     "AGE-SECRET-KEY-1[0-9A-Z]{58}", {"AGE-SECRET-KEY-1"}, 0, CB_GATE_NONE, B | C},
    /* ---- AI providers --------------------------------------------------- */
    {"openai-api-key", "OpenAI user API key (legacy sk-...T3BlbkFJ... / sk- + 48)",
     "sk-(?:[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}|[A-Za-z0-9]{48})" TOKEN_END("[A-Za-z0-9_-]"),
     {"sk-"}, 0, CB_GATE_NONE, B | C},
    {"openai-project-key", "OpenAI project key (sk-proj-)",
     "sk-proj-[A-Za-z0-9_-]{40,250}", {"sk-proj-"}, 0, CB_GATE_NONE, B | C},
    {"openai-service-account-key", "OpenAI service account / admin key (sk-svcacct-/sk-admin-)",
     "sk-(?:svcacct|admin)-[A-Za-z0-9_-]{40,250}", {"sk-svcacct-", "sk-admin-"}, 0, CB_GATE_NONE, B | C},
    {"anthropic-api-key", "Anthropic API key (sk-ant-api03-)",
     "sk-ant-api[0-9]{2}-[A-Za-z0-9_-]{80,120}", {"sk-ant-api"}, 0, CB_GATE_NONE, B | C},
    {"anthropic-admin-key", "Anthropic admin key (sk-ant-admin01-)",
     "sk-ant-admin[0-9]{2}-[A-Za-z0-9_-]{80,120}", {"sk-ant-admin"}, 0, CB_GATE_NONE, B | C},
    {"anthropic-oauth-token", "Anthropic OAuth access/refresh token (sk-ant-oat01-/sk-ant-ort01-)",
     "sk-ant-o[ar]t[0-9]{2}-[A-Za-z0-9_-]{40,200}", {"sk-ant-oat", "sk-ant-ort"}, 0, CB_GATE_NONE, B | C},
    {"huggingface-token", "Hugging Face access token (hf_)",
     "hf_[A-Za-z0-9]{30,40}" TOKEN_END("[A-Za-z0-9_]"), {"hf_"}, 0, CB_GATE_NONE, B | C},
    {"groq-api-key", "Groq API key (gsk_)",
     "gsk_[A-Za-z0-9]{48,52}" TOKEN_END("[A-Za-z0-9]"), {"gsk_"}, 0, CB_GATE_NONE, B | C},
    {"xai-api-key", "xAI API key (xai-)",
     "xai-[A-Za-z0-9]{70,90}" TOKEN_END("[A-Za-z0-9]"), {"xai-"}, 0, CB_GATE_NONE, B | C},
    {"perplexity-api-key", "Perplexity API key (pplx-)",
     "pplx-[A-Za-z0-9]{40,56}" TOKEN_END("[A-Za-z0-9]"), {"pplx-"}, 0, CB_GATE_NONE, B | C},
    {"replicate-api-token", "Replicate API token (r8_)",
     "r8_[A-Za-z0-9]{37,40}" TOKEN_END("[A-Za-z0-9]"), {"r8_"}, 0, CB_GATE_NONE, B | C},
    /* ---- package registries --------------------------------------------- */
    {"npm-access-token", "npm access token (npm_)",
     "npm_[A-Za-z0-9]{36}" TOKEN_END("[A-Za-z0-9]"), {"npm_"}, 0, CB_GATE_NONE, B | C},
    {"npmrc-auth", "npm/yarn registry credential in .npmrc (_authToken=, _auth=, _password=)",
     "(?<![A-Za-z0-9_])_(?:authToken|auth|password)\\s*=\\s*[\"']?([^\\s\"']{8,4096})",
     {"_authToken", "_auth", "_password"}, 0, CB_GATE_PLACEHOLDER, C | A},
    {"pypi-token", "PyPI upload token (pypi-AgE...)",
     "pypi-AgE[A-Za-z0-9_-]{50,300}", {"pypi-AgE"}, 0, CB_GATE_NONE, B | C},
    /* ---- structural ----------------------------------------------------- */
    {"jwt", "JSON Web Token (eyJ... . ... . ...)",
     "eyJ[A-Za-z0-9_-]{8,4096}\\.[A-Za-z0-9_-]{8,8192}\\.[A-Za-z0-9_-]{0,4096}", {"eyJ"}, 0, CB_GATE_NONE, B | C},
    /* A block with its END line, or (cut off, e.g. a 200-character preview)
     * everything base64-like after BEGIN: the body never leaks. Lines may be
     * real newlines or "\n" escapes inside a JSON string. */
    {"private-key", "PEM/OpenSSH/PGP private key block",
     "-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
     "(?:(?s).{0,65535}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
     "|(?:[A-Za-z0-9+/=:,. \\t\\r\\n-]|\\\\[rnt])*+)",
     {"-----BEGIN"}, 0, CB_GATE_NONE, C},
    {"url-credentials", "Password inside a URL (scheme://user:pass@host)",
     "(?<=[A-Za-z0-9])://[^\\s/?#@:\"'<>\\[\\]]{0,256}:([^\\s/?#@:\"'<>]{1,256})@(?=[A-Za-z0-9\\[._-])",
     {"://"}, 0, CB_GATE_PLACEHOLDER, 0},
    {"url-token", "Token used as the user part of a URL (https://<token>@host)",
     "(?<=[A-Za-z0-9])://([A-Za-z0-9_-]{20,256})@(?=[A-Za-z0-9\\[._-])", {"://"}, 0, CB_GATE_RANDOM, 0},
    {"authorization-header", "Authorization header credential (Bearer/Basic/Token/...)",
     "(?i)(?:proxy-)?authorization\\\\?[\"']?\\s*[:=]\\s*\\\\?[\"']?"
     "(?:(?:bearer|basic|token|bot|apikey|api-key|sso-key|dpop|key|digest|negotiate|ntlm|aws4-hmac-sha256)[ \\t]+)?"
     "([^\\s\"'\\\\]{6,4096})",
     {"authorization"}, 0, CB_GATE_PASSWORD, B | A},
    {"bearer-token", "Bearer token anywhere (Bearer <token>)",
     "(?i)bearer[ \\t]+([A-Za-z0-9._~+/-]{16,4096}=*)", {"bearer"}, 0, CB_GATE_PLACEHOLDER, B},
    {"api-key-header", "API key headers (X-Api-Key, X-Auth-Token, Private-Token, ...)",
     "(?i)(?:x-api-key|x-auth-token|private-token|x-goog-api-key|ocp-apim-subscription-key|x-access-token)"
     "\\\\?[\"']?\\s*[:=]\\s*\\\\?[\"']?([^\\s\"',;\\\\]{6,4096})",
     {"x-api-key", "x-auth-token", "private-token", "x-goog-api-key", "ocp-apim-subscription-key",
      "x-access-token"}, 0, CB_GATE_PASSWORD, B | A},
    {"curl-user-password", "curl -u / --user user:password",
     "(?<![\\w-])(?:-u[ \\t]*|--user(?:[ \\t]+|=))[\"']?[!#-&(-9;-~]{1,128}:([!#-&(-~]{1,256})",
     {"-u", "--user"}, 0, CB_GATE_PLACEHOLDER, C},
    {"connection-string-password", "Password=/Pwd= inside a ;-separated connection string",
     "(?i)(?<=;|; )(?:password|pwd)\\s*=\\s*([^;\"'\\r\\n]{1,256})", {"password", "pwd"}, 0, CB_GATE_PLACEHOLDER, A},
    {"cli-secret-flag", "Secret passed as a command-line flag (--password x, --api-key=x)",
     "--(?:[A-Za-z0-9]+[-_])*(?i:api[-_]?key|access[-_]?key|secret(?:[-_]key)?|client[-_]secret|token"
     "|auth[-_]token|password|passwd|pass)(?:=|[ \\t]+)" VALUE("1"),
     {"--"}, 0, CB_GATE_PASSWORD, 0},
    {"generic-password", "password/passwd/pwd/passphrase assignment (env, JSON, YAML)",
     "(?i)(?:password|passwd|passphrase|pwd)" NAME_TAIL ASSIGN VALUE("1"),
     {"password", "passwd", "passphrase", "pwd"}, 0, CB_GATE_PASSWORD, B | A},
    {"generic-secret", "key/secret/token/auth/credential assignment whose value looks random",
     "(?i)(?:key|secret|token|auth|cred)" NAME_TAIL ASSIGN VALUE("8"),
     {"key", "secret", "token", "auth", "cred"}, 0, CB_GATE_RANDOM, B | A},
};

const size_t cb_redact_catalog_count = sizeof cb_redact_catalog / sizeof cb_redact_catalog[0];
