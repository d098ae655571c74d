"""``redact_secrets``: credentials replaced by typed placeholders, by one table of rules.

Pass it as ``Memory(..., redact=redact_secrets)`` (the default; or compose it with your
own function): the flows run ``redact`` on a memory's text and on every string in its
metadata before anything is embedded or stored, and on a recall's query before it is
embedded or searched (``docs/privacy.md``). Each match becomes ``[REDACTED:<kind>]``; the
rest of the text is kept as it was.

``_RULES`` is the whole behaviour: one row per kind, in the order they are applied, each
with the literal words one of which any match contains (its *triggers*, as gitleaks'
``keywords``: a text holding none of a rule's triggers is not searched with its pattern,
so the usual text, which holds no secret, costs one look for each trigger) and its
pattern. A pattern replaces its whole match, or, when it has a group named ``keep``, all
of the match but that group (the ``password=`` before a password stays).

The token formats are those the providers document and the public secret scanners ship
rules for: gitleaks (``config/gitleaks.toml``, ``cmd/generate/config/rules/*.go``) and
Yelp's detect-secrets (``detect_secrets/plugins/*.py``); each row names its sources. They
are deliberately specific (a known prefix, or a keyword next to the value), so ordinary
text is left alone (``eval/redaction.py`` measures it on LoCoMo's conversations); they
are not a data-loss-prevention system.

Every pattern runs in time linear in the text: a token's pattern can only start where its
character run starts (the look-behind), runs are matched possessively (``++``, no
backtracking into them) and every other repetition is bounded, so a text of repeated
trigger words costs time in proportion to its length (``tests/core/test_redact.py``
bounds 100 kB per rule and 1 MB adversarial texts). Standard library ``re`` only (the
core runs in Pyodide).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from engramdb._base.errors import ConfigurationError

__all__ = ["SECRET_KINDS", "redact_secrets", "redact_setting"]


class _Rule:
    """One row of the table: the ``kind`` its placeholder names, its ``triggers`` (literals
    one of which every match contains: as written, or lower-cased when the pattern
    ignores case, ``folded``, and then looked for in the lower-cased text) and its
    pattern, compiled the first time a text needs it (an import compiles nothing: a
    Worker's cold start pays for no rule it does not use)."""

    __slots__ = ("_compiled", "_flags", "_source", "folded", "kind", "replacement", "triggers")

    def __init__(self, kind: str, triggers: tuple[str, ...], source: str, flags: int = 0) -> None:
        self.kind = kind
        self.triggers = triggers
        self.folded = bool(flags & re.IGNORECASE)
        placeholder = f"[REDACTED:{kind}]"
        self.replacement = r"\g<keep>" + placeholder if "(?P<keep>" in source else placeholder
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self._source, self._flags)
        return self._compiled


_I = re.IGNORECASE | re.ASCII  # ASCII letters only: the triggers are found by str.lower()

# A token starts where a run of token characters starts, and ends where it ends.
_B = r"(?<![A-Za-z0-9_-])"
_E = r"(?![A-Za-z0-9_-])"

# Keyword forms: ``<name><sep><value>``, the name kept. A name may carry any prefix
# (DB_PASSWORD, client_secret, x-api-key, _authToken) but no suffix (token_count, tokens);
# then a JSON key's closing quote or a subscript's (``'password']``; a bare ``]`` ends a
# placeholder, never a name), a separator (= : := => ==) and an optional opening quote.
# A quoted value runs to its closing quote or the end of the line (spaces included, but
# not first: ```password=` and`` is Markdown); a bare one to a space, quote, ``;``, ``&``
# or ``,``. An empty value, a placeholder already there, a mask or an ellipsis (``***``,
# ``...``), a reference (``${X}``, ``$DB_PASSWORD``, ``$(cmd)``, ``{{ x }}``, ``<your
# key>``) and, bare, a call or a subscript in code (``hash_password(raw)``,
# ``os.environ["X"]``) stay.
_NAME_END = r"(?![A-Za-z0-9_-])(?>(?:[\"']\]?)?)"
_ASSIGN = r"(?>[ \t]*+(?::=|=>|==|[:=])[ \t]*+[\"'`]?)"


def _value(least: int) -> str:
    return (
        r"(?!\s|\[REDACTED:|\$[({A-Z_]|\{\{|<|[*.\u2026]++(?![^\s\"'`;&,]))"
        rf"(?:(?<=\")(?>(?:[^\"\\\n]|\\.){{{least},}})"
        rf"|(?<=')[^'\n]{{{least},}}+"
        rf"|(?<=`)[^`\n]{{{least},}}+"
        rf"|(?<![\"'`])(?![A-Za-z_][\w.]*+[(\[])[^\s\"'`;&,]{{{least},}}+)"
    )


def _keyed(name: str, least: int) -> str:
    return rf"(?P<keep>{name}{_NAME_END}{_ASSIGN}){_value(least)}"


# A repeated group is made atomic with (?>(?:...)*), never possessive with (?:...)*+:
# CPython 3.11.2 (Debian 12's python3) matches a possessive repeat of a group with an
# alternation or a lookahead wrongly (a PEM key's match stopped before its END line),
# where later 3.11 releases and (?> ) agree. A test holds every rule to this.
_RULES: tuple[_Rule, ...] = (
    # -- private keys ------------------------------------------------------------------
    # PEM (PKCS#1/#8, EC, DSA, OPENSSH, ENCRYPTED, PGP's "PRIVATE KEY BLOCK", SSH2's
    # four-dash form), also inside JSON with \n escapes (a GCP service-account file), from
    # its BEGIN line to its END line or, cut short, to the next dash run or the text's
    # end; and PuTTY's Private-Lines. gitleaks private-key; detect-secrets private_key.
    _Rule(
        "private_key",
        ("-----begin", "---- begin", "private-lines:"),
        r"-{4,5} ?BEGIN[ A-Z0-9_-]{0,100}?PRIVATE KEY(?: BLOCK)? ?-{4,5}"
        r"(?>(?:[^-]++|-(?!---))*)"
        r"(?:-{4,5} ?END[ A-Z0-9_-]{0,100}?PRIVATE KEY(?: BLOCK)? ?-{4,5})?"
        r"|(?<=Private-Lines: )[0-9]{1,4}+\s++(?>(?:(?!Private-MAC:)[A-Za-z0-9+/=]++\s*+)+)",
        _I,
    ),
    # -- AI providers ------------------------------------------------------------------
    # Anthropic sk-ant-api03-… / sk-ant-admin01-… (gitleaks anthropic-api-key,
    # anthropic-admin-api-key); before OpenAI's, whose prefix it shares.
    _Rule("anthropic_key", ("sk-ant-",), _B + r"sk-ant-[A-Za-z0-9_-]{20,}+"),
    # OpenAI sk-…, sk-proj-…, sk-svcacct-…, sk-admin-… (gitleaks openai-api-key,
    # detect-secrets openai; both also require the T3BlbkFJ marker, which project keys no
    # longer always carry, so any 20 or more key characters after the prefix).
    _Rule("openai_key", ("sk-",), _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}+"),
    # Hugging Face user (hf_) and organisation (api_org_) tokens: 34 letters
    # (gitleaks huggingface-access-token, huggingface-organization-api-token).
    _Rule("huggingface_token", ("hf_", "api_org_"), _B + r"(?:hf|api_org)_[A-Za-z]{34}" + _E),
    # Groq gsk_ + 48 (gitleaks groq-api-key); Replicate r8_ + 37 (replicate.com/docs:
    # "40-character strings that always start with r8_"); Perplexity pplx- + 48 (gitleaks
    # perplexity-api-key); xAI xai- + 70 or more (no published rule: what community
    # scanners match); LangSmith lsv2_pt_/lsv2_sk_ (gitleaks langsmith-api-key).
    _Rule("groq_key", ("gsk_",), _B + r"gsk_[A-Za-z0-9]{48}" + _E),
    _Rule("replicate_token", ("r8_",), _B + r"r8_[A-Za-z0-9]{37}" + _E),
    _Rule("perplexity_key", ("pplx-",), _B + r"pplx-[A-Za-z0-9]{48}" + _E),
    _Rule("xai_key", ("xai-",), _B + r"xai-[A-Za-z0-9]{70,}+"),
    _Rule("langsmith_key", ("lsv2_",), _B + r"lsv2_(?:pt|sk)_[a-z0-9]{32}_[a-z0-9]{10}" + _E),
    # -- cloud ---------------------------------------------------------------------------
    # AWS access key ids (gitleaks aws-access-token: base32 after the prefix;
    # detect-secrets aws).
    _Rule(
        "aws_access_key_id",
        ("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
        r"(?<![A-Za-z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])",
    ),
    # AWS secret access key: 40 base64 characters after an aws…secret… name
    # (detect-secrets aws; gitleaks aws-secret). A bare 40-character string (a git SHA)
    # is never taken for one.
    _Rule(
        "aws_secret_access_key",
        ("aws",),
        r"(?P<keep>aws[_-]?secret(?:[_-]?access)?(?:[_-]?key)?" + _NAME_END + _ASSIGN + ")"
        r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        _I,
    ),
    # Google API keys AIza… (GCP, Firebase, Gemini; gitleaks gcp-api-key).
    _Rule("google_api_key", ("AIza",), _B + r"AIza[A-Za-z0-9_-]{35}" + _E),
    # Azure storage account keys and Service Bus / Event Hubs keys in a connection string
    # (detect-secrets azure_storage_key: AccountKey= and 88 base64 characters).
    _Rule(
        "azure_storage_key",
        ("accountkey", "sharedaccesskey"),
        r"(?P<keep>(?<![A-Za-z0-9])(?:AccountKey|SharedAccessKey)[ \t]*+=[ \t]*+)"
        r"[A-Za-z0-9+/]{20,}+={0,2}",
        _I,
    ),
    # DigitalOcean personal access, OAuth and refresh tokens (gitleaks digitalocean-*).
    _Rule(
        "digitalocean_token",
        ("dop_v1_", "doo_v1_", "dor_v1_"),
        _B + r"do[opr]_v1_[a-f0-9]{64}" + _E,
    ),
    # -- payment -------------------------------------------------------------------------
    # Stripe secret and restricted keys (gitleaks stripe-access-token, detect-secrets
    # stripe) and webhook signing secrets whsec_. Publishable keys (pk_live_) are public
    # by design and stay.
    _Rule(
        "stripe_key",
        ("sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_", "whsec_"),
        _B + r"(?:[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,}+|whsec_[A-Za-z0-9+/=]{24,}+)",
    ),
    # Square access tokens and OAuth secrets (gitleaks square-access-token,
    # detect-secrets square_oauth).
    _Rule(
        "square_token",
        ("EAAA", "sq0atp-", "sq0csp-"),
        _B + r"(?:EAAA|sq0atp-|sq0csp-)[A-Za-z0-9_-]{22,}+",
    ),
    # PayPal Braintree access tokens (gitleaks braintree-access-token).
    _Rule(
        "braintree_token",
        ("access_token$",),
        r"access_token\$(?:production|sandbox)\$[0-9a-z]{16}(?:\$[0-9a-f]{32})?",
    ),
    # -- version control -----------------------------------------------------------------
    # GitHub classic (ghp_ gho_ ghu_ ghs_ ghr_) and fine-grained (github_pat_) tokens
    # (gitleaks github-*, detect-secrets github_token).
    _Rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}+|github_pat_[A-Za-z0-9_]{22,}+)",
    ),
    # GitLab personal, deploy, feed, runner, SCIM, trigger, mail, agent, OAuth, feature
    # flag and CI job tokens, routable ones included (gitleaks gitlab-*, detect-secrets
    # gitlab_token).
    _Rule(
        "gitlab_token",
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glrt-",
            "glsoat-",
            "glptt-",
            "glimt-",
            "glagent-",
            "gloas-",
            "glffct-",
            "glcbt-",
            "GR1348941",
        ),
        _B + r"(?:gl(?:pat|dt|ft|rt|soat|ptt|imt|agent|oas|ffct|cbt)-|GR1348941)"
        r"[A-Za-z0-9_-]{20,}+(?:\.[0-9a-z]{9})?",
    ),
    # Atlassian API tokens (used by Bitbucket Cloud), Bitbucket access tokens and app
    # passwords, Bitbucket Data Center tokens (gitleaks atlassian-api-token).
    _Rule(
        "atlassian_token",
        ("ATATT3", "ATCTT3", "ATBB", "BBDC-"),
        _B + r"(?:(?:ATATT3|ATCTT3|ATBB)[A-Za-z0-9_=-]{24,}+|BBDC-[A-Za-z0-9+/@_-]{40,}+)",
    ),
    # -- chat ------------------------------------------------------------------------------
    # Slack bot, user, app, workspace, legacy and configuration tokens (gitleaks slack-*,
    # detect-secrets slack).
    _Rule(
        "slack_token",
        ("xox", "xapp-"),
        _B + r"(?:xox[abposre]-|xoxe\.xox[bp]-|xapp-)[A-Za-z0-9-]{10,}+",
    ),
    # Slack and Discord webhook URLs: whoever holds one can post (gitleaks
    # slack-webhook-url, detect-secrets slack).
    _Rule(
        "slack_webhook",
        ("hooks.slack.com",),
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{20,}+",
        _I,
    ),
    _Rule(
        "discord_webhook",
        ("discord",),
        r"(?:https?://)?(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]{5,30}+/"
        r"[A-Za-z0-9_-]{20,}+",
        _I,
    ),
    # Telegram bot tokens: the bot's number, a colon, 35 characters starting A
    # (gitleaks telegram-bot-api-token, detect-secrets telegram_token).
    _Rule("telegram_bot_token", (":A",), r"(?<![0-9])[0-9]{5,16}:A[A-Za-z0-9_-]{34}" + _E),
    # -- package registries and other services ---------------------------------------------
    _Rule("npm_token", ("npm_",), _B + r"npm_[A-Za-z0-9]{36}" + _E),  # gitleaks npm-access-token
    # PyPI and TestPyPI upload tokens (gitleaks pypi-upload-token, detect-secrets pypi_token).
    _Rule(
        "pypi_token",
        ("pypi-AgE",),
        r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}+",
    ),
    # SendGrid (detect-secrets sendgrid, gitleaks sendgrid-api-token).
    _Rule("sendgrid_key", ("SG.",), _B + r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + _E),
    # Twilio API key and account SIDs (detect-secrets twilio, gitleaks twilio-api-key).
    _Rule("twilio_key", ("SK", "AC"), _B + r"(?:SK|AC)[0-9a-f]{32}" + _E),
    # Mailgun private keys (gitleaks mailgun-private-api-token) and Mailchimp keys
    # (detect-secrets mailchimp, gitleaks mailchimp-api-key).
    _Rule("mailgun_key", ("key-",), _B + r"key-[0-9a-f]{32}" + _E),
    _Rule("mailchimp_key", ("-us",), _B + r"[0-9a-f]{32}-us[0-9]{1,2}" + _E),
    # Shopify access tokens and shared secrets (gitleaks shopify-*).
    _Rule(
        "shopify_token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        _B + r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E,
    ),
    # -- JSON Web Tokens (gitleaks jwt, detect-secrets jwt) --------------------------------
    _Rule(
        "jwt",
        ("eyJ",),
        _B + r"eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
    ),
    # -- keyword assignments (detect-secrets keyword, gitleaks generic-api-key) -------------
    # A password of any length; ``password is hunter2`` too when the value holds a digit
    # or a symbol (a plain word after "is" is prose).
    _Rule(
        "password",
        ("passw", "passphrase", "pwd"),
        r"(?P<keep>(?:passw(?:or)?d|passphrase|pwd)(?:"
        + _NAME_END
        + _ASSIGN
        + r"|(?P<is>[ \t]++(?:is|was)(?:[ \t]*+:)?[ \t]++)))"
        r"(?(is)(?=[A-Za-z]{0,64}+[0-9!#$%&*+=?@^_~])[^\s\"'`]{4,}+|" + _value(1) + ")",
        _I,
    ),
    # Secrets, tokens and API keys of at least 8 characters (token=5 is a count).
    _Rule("secret", ("secret",), _keyed(r"secret(?:[_-]?(?:access[_-]?)?key|[_-]?token)?", 8), _I),
    _Rule("token", ("token",), _keyed("token", 8), _I),
    _Rule(
        "api_key",
        ("key",),
        _keyed(r"(?:api|access|auth|private|client|master|encryption|signing)[_-]?key", 8),
        _I,
    ),
    # -- HTTP credentials ------------------------------------------------------------------
    # Authorization: Bearer … and Authorization: Basic base64(user:password).
    _Rule("bearer_token", ("bearer",), r"(?P<keep>\bbearer\s++)[A-Za-z0-9._~+/-]{16,}+=*+", _I),
    _Rule(
        "basic_auth",
        ("basic",),
        r"(?P<keep>\bauthorization[\"']?[ \t]*+[:=][ \t]*+[\"']?basic[ \t]++)"
        r"[A-Za-z0-9+/]{8,}+={0,2}",
        _I,
    ),
    # The password of a URL's user info: scheme://user:password@host (detect-secrets
    # basic_auth). The password runs to the last @ before the host.
    _Rule(
        "url_password",
        ("://",),
        r"(?P<keep>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://[^\s/:@]*+:)(?!\[REDACTED:)[^\s/]+(?=@)",
        _I,
    ),
)

SECRET_KINDS: tuple[str, ...] = tuple(rule.kind for rule in _RULES)
"""The kinds ``redact_secrets`` recognises, as they appear in its placeholders."""

# The triggers, each with the index of its rule: looked for as written, or in the
# lower-cased text for a rule that ignores case; grouped under the first of _GATES they
# contain (a group is looked at only when its gate is in the text: prose has no "_").
_GATES = ("_", "-", ":", ".", "key", "pass", "")
_Screen = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]


def _screen(folded: bool) -> _Screen:
    groups: dict[str, list[tuple[str, int]]] = {}
    for index, rule in enumerate(_RULES):
        if rule.folded is folded:
            for trigger in rule.triggers:
                gate = next(gate for gate in _GATES if gate in trigger)
                groups.setdefault(gate, []).append((trigger, index))
    return tuple((gate, tuple(members)) for gate, members in groups.items())


_AS_WRITTEN = _screen(folded=False)
_FOLDED = _screen(folded=True)


def _due(text: str, screen: _Screen, due: set[int]) -> None:
    for gate, members in screen:
        if gate in text:
            for trigger, index in members:
                if trigger in text:
                    due.add(index)


def redact_secrets(text: str) -> str:
    """``text`` with every recognised credential replaced by ``[REDACTED:<kind>]``."""
    due: set[int] = set()
    _due(text, _AS_WRITTEN, due)
    _due(text.lower(), _FOLDED, due)
    for index in sorted(due):  # in the table's order
        rule = _RULES[index]
        text = rule.pattern.sub(rule.replacement, text)
    return text


def redact_setting(value: str, name: str = "ENGRAMDB_REDACT") -> Callable[[str], str] | None:
    """The ``redact`` a face's setting ``name`` asks for: ``secrets`` (or empty, the
    default) gives :func:`redact_secrets`, ``off`` gives None (texts kept as given)."""
    word = value.strip().lower()
    if word in ("", "secrets", "on"):
        return redact_secrets
    if word in ("off", "none"):
        return None
    raise ConfigurationError(
        f"{name}={value[:40]!r} is not understood; use secrets (the default) or off"
    )
