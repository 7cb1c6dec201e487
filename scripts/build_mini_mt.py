"""Generate the built-in ``mini-mt`` conversation set: ``matrix/datasets/data/mini_mt.jsonl``.

    .venv/bin/python scripts/build_mini_mt.py --write   # regenerate the shipped file
    .venv/bin/python scripts/build_mini_mt.py --check   # exit 1 when it differs, byte for byte, from the output

The package ships only the file and what reads it (``promptgrid.matrix.datasets._mini_mt``: the
languages, the file's path, how tool results reach the model); this script is the set's source: the locales,
the 24 templates and their texts in every language. Edit it, run ``--write``, and commit both (the tests
check that the shipped file is this script's output). Building needs bfcl-eval installed: its classes compute
the generated ids and check that every ground-truth call succeeds.

What it is
----------
24 conversation templates (``mini_mt_1`` ... ``mini_mt_24``), each written
in nine languages (``en, de, es, fr, it, ja, zh, hi, pt``): 216
conversations with 2 to 5 user turns, in Ticket-Bench's manner: booking,
travel, messaging and support-ticket tasks on BFCL V4's stateful classes
(``TravelAPI``, ``MessageAPI``, ``TicketAPI``), whose state holds the
entities of the user's region. Written for promptgrid; nothing is copied from
a benchmark. Ids are ``mini_mt_<n>_<lang>``; ``template`` is ``mini_mt_<n>``
(the same task in every language) and ``language`` the ISO code.

Localization
------------
Per language, a person and their region (``_LOCALES``): the user's name (in
its own script: 佐藤美咲, 王芳, प्रिया शर्मा), the name of a partner who holds
the second credit card, colleagues in the messaging workspace (two of them
share a first name, for the clarification template), a ticket-system login,
localized support-ticket titles and message texts, the currency (USD, EUR,
JPY, RMB, INR, BRL) and the way dates and amounts are written (``14. Mai
2026``, ``2026年5月14日``, ``₹1,40,000``, ``R$ 7.600``). Cities are
localized only where TravelAPI's fixed tables know them (London->Paris for
French, San Francisco->Rome for Italian, Los Angeles->Tokyo for Japanese,
New York->Beijing for Chinese); the other languages fly the US routes it
knows, with the city names written in the language (Nova York, Los Ángeles,
न्यूयॉर्क). The ground truth carries the localized values (names, message
texts, ticket titles) and the API's own forms (IATA codes, ``YYYY-MM-DD``,
amounts in USD where the API wants USD: a budget given in euros is converted
with ``compute_exchange_rate`` first; in English no conversion is needed).
The ``initial_config`` is localized consistently, so every language has a
valid answer; booking ids created by a turn are computed by running the
ground truth on bfcl-eval's classes (their random generators are seeded by the
scenario, so the ids are fixed).

Templates
---------
1 flight cost, booking, invoice; 2 budget in local currency, business
booking; 3 booking history, cancel by date, card balance; 4 insurance and a
message to support; 5 first-class cost in local currency, economy, booking;
6 message a colleague, list sent messages; 7 booking, then a message;
8 ticket: log in, create, raise priority, close; 9 resolve an open ticket;
10 nearest airport by (localized) city name, first-class booking; 11 two
bookings, cancel one; 12 registered cards, book with the partner's card,
balance; 13 booking, support contact, ticket, open tickets (4 turns);
14 balance, booking, insurance, balance, message (5 turns).

No-solution turns (``no_solution_turns``), templates 15-19: the request
cannot be done as asked, so the right answer changes nothing and says so. The
turn's ground truth holds only read-only calls (15, 17) or none (16, 18,
19), and the next turn's state check catches a model that went ahead:
15 book only below a price the flight exceeds; 16 cancel a booking id that
does not exist (another booking exists); 17 book with a card only if a reserve
stays on it, which it would not; 18 message a person who is not in the
workspace, without adding anyone; 19 close a ticket id that does not exist.
``forbidden_calls()`` gives, per no-solution conversation, the state-changing
calls a model that ignored the condition would make (the tests check that such
a trajectory is scored invalid).

Clarification turns (``clarify_turns``), templates 20-24: the turn lacks a
required value, its ground truth is empty, and the next user turn gives the
value: 20 the travel date; 21 which of two cards; 22 the budget amount; 23
which of two colleagues with the same first name; 24 which ticket and the
resolution text.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from promptgrid.matrix.datasets._mini_mt import DATA_FILE, MINI_MT_LANGUAGES  # noqa: E402

READ_ONLY = frozenset({
    "get_flight_cost", "get_credit_card_balance", "get_all_credit_cards", "get_booking_history",
    "retrieve_invoice", "compute_exchange_rate", "get_nearest_airport_by_city", "list_all_airports",
    "get_budget_fiscal_year", "travel_get_login_status", "verify_traveler_information", "list_users",
    "get_user_id", "view_messages_sent", "search_messages", "get_message_stats", "message_get_login_status",
    "get_ticket", "get_user_tickets", "ticket_get_login_status",
})
"""Functions that change no state: what a no-solution turn's ground truth may hold."""

# --------------------------------------------------------------------------- locales

_RATES = {"USD": 1, "EUR": 0.8, "JPY": 110, "RMB": 7, "INR": 70, "BRL": 3.8, "CAD": 1.3}  # TravelAPI's table

_MONTHS = {
    "en": "January February March April May June July August September October November December",
    "de": "Januar Februar März April Mai Juni Juli August September Oktober November Dezember",
    "es": "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre diciembre",
    "fr": "janvier février mars avril mai juin juillet août septembre octobre novembre décembre",
    "it": "gennaio febbraio marzo aprile maggio giugno luglio agosto settembre ottobre novembre dicembre",
    "hi": "जनवरी फ़रवरी मार्च अप्रैल मई जून जुलाई अगस्त सितंबर अक्टूबर नवंबर दिसंबर",
    "pt": "janeiro fevereiro março abril maio junho julho agosto setembro outubro novembro dezembro",
}


def _date(lang: str, iso: str) -> str:
    """A date as the user writes it."""
    year, month, day = (int(part) for part in iso.split("-"))
    if lang in ("ja", "zh"):
        return f"{year}年{month}月{day}日"
    name = _MONTHS[lang].split()[month - 1]
    return {"en": f"{name} {day}, {year}", "de": f"{day}. {name} {year}", "es": f"{day} de {name} de {year}",
            "fr": f"{day} {name} {year}", "it": f"{day} {name} {year}", "hi": f"{day} {name} {year}",
            "pt": f"{day} de {name} de {year}"}[lang]


def _group(value: int, sep: str) -> str:
    return f"{value:,}".replace(",", sep)


def _indian(value: int) -> str:
    text = str(value)
    if len(text) <= 3:
        return text
    head, tail = text[:-3], text[-3:]
    parts: list[str] = []
    while len(head) > 2:
        parts.insert(0, head[-2:])
        head = head[:-2]
    return ",".join([head, *parts, tail]) if head else ",".join([*parts, tail])


def _money(lang: str, value: int) -> str:
    """An amount in the language's own currency, as the user writes it."""
    return {"en": f"${_group(value, ',')}", "de": f"{_group(value, '.')} €", "es": f"{_group(value, '.')} €",
            "fr": f"{_group(value, ' ')} €", "it": f"{_group(value, '.')} euro", "ja": f"{_group(value, ',')}円",
            "zh": f"{_group(value, ',')}元人民币", "hi": f"₹{_indian(value)}", "pt": f"R$ {_group(value, '.')}"}[lang]


def _dollars(lang: str, value: int) -> str:
    """An amount in US dollars, said in the language."""
    return {"en": f"${value}", "de": f"{value} US-Dollar", "es": f"{value} dólares estadounidenses",
            "fr": f"{value} dollars américains", "it": f"{value} dollari americani", "ja": f"{value}米ドル",
            "zh": f"{value}美元", "hi": f"{value} अमेरिकी डॉलर", "pt": f"US$ {value}"}[lang]


@dataclass(frozen=True)
class _Locale:
    lang: str
    first: str
    last: str
    me: str
    partner: str
    currency: str
    frm: str  # the departure city as the user writes it
    to: str
    frm_en: str  # the same city as TravelAPI's get_nearest_airport_by_city knows it
    frm_code: str
    to_code: str
    friend: str
    amb1: str
    amb2: str
    amb_short: str  # how the user refers to either of amb1 and amb2
    stranger: str  # not in the workspace
    tuser: str
    tpw: str
    ticket_a: tuple[str, str]  # (title, description) of two existing support tickets
    ticket_b: tuple[str, str]
    inbox: tuple[str, str]  # messages already sent to friend and amb1
    digits: str  # makes ids, card numbers and tokens differ per language

    @property
    def token(self) -> str:
        return f"tk-{self.lang}-{self.digits}"

    @property
    def card(self) -> str:
        return f"7{self.digits}{self.digits[::-1]}{self.digits[:3]}"  # 12 digits, as TravelAPI's own card ids

    @property
    def card2(self) -> str:
        return f"3{self.digits[::-1]}{self.digits}{self.digits[1:]}"

    def money(self, usd: float) -> int:
        """``usd`` in the local currency, as a whole number."""
        return int(round(usd * _RATES[self.currency]))


_LOCALES = {locale.lang: locale for locale in (
    _Locale("en", "Emily", "Carter", "Emily Carter", "Daniel Carter", "USD", "New York", "Boston", "New York",
            "JFK", "BOS", "Jake Miller", "Olivia Brown", "Olivia Reed", "Olivia", "Ryan Cooper", "ecarter",
            "maple-2026", ("Laptop battery drains overnight", "The battery is empty every morning."),
            ("Expense report rejected", "My March expense report was rejected without a reason."),
            ("See you at the offsite!", "Can you send me the slides?"), "4821"),
    _Locale("de", "Lukas", "Becker", "Lukas Becker", "Sophie Becker", "EUR", "Chicago", "Boston", "Chicago",
            "ORD", "BOS", "Jonas Wagner", "Anna Schmidt", "Anna Weber", "Anna", "Felix Hoffmann", "lbecker",
            "Tanne-2026", ("VPN bricht im Hotel-WLAN ab", "Die VPN-Verbindung bricht alle zehn Minuten ab."),
            ("Reisekostenabrechnung abgelehnt", "Meine Abrechnung für März wurde ohne Begründung abgelehnt."),
            ("Bis Montag in der Zentrale!", "Schickst du mir bitte die Folien?"), "7315"),
    _Locale("es", "Lucía", "Fernández", "Lucía Fernández", "Pablo Fernández", "EUR", "San Francisco",
            "Los Ángeles", "San Francisco", "SFO", "LAX", "Javier Ruiz", "Carmen López", "Carmen Ortega", "Carmen",
            "Diego Navarro", "lfernandez", "Olivo-2026",
            ("El portátil no carga", "El cargador no funciona desde ayer."),
            ("Factura de hotel duplicada", "El hotel de Sevilla me cobró dos veces la misma noche."),
            ("¡Nos vemos en la reunión!", "¿Me mandas la presentación?"), "5264"),
    _Locale("fr", "Camille", "Durand", "Camille Durand", "Thomas Durand", "EUR", "Londres", "Paris", "London",
            "LHR", "CDG", "Julien Moreau", "Claire Petit", "Claire Lambert", "Claire", "Hugo Fontaine", "cdurand",
            "Tilleul-2026", ("Badge d'accès refusé", "Mon badge ne fonctionne plus à l'entrée du bâtiment B."),
            ("Note de frais bloquée", "Ma note de frais de mars est bloquée depuis trois semaines."),
            ("À lundi au siège !", "Tu peux m'envoyer les diapositives ?"), "6092"),
    _Locale("it", "Giulia", "Romano", "Giulia Romano", "Luca Romano", "EUR", "San Francisco", "Roma",
            "San Francisco", "SFO", "CIA", "Marco Bianchi", "Chiara Ricci", "Chiara Greco", "Chiara",
            "Davide Conti", "gromano", "Ulivo-2026",
            ("Stampante del terzo piano guasta", "La stampante si blocca a ogni stampa a colori."),
            ("Rimborso spese in ritardo", "Il rimborso della trasferta di marzo non è ancora arrivato."),
            ("Ci vediamo lunedì in sede!", "Mi mandi le slide, per favore?"), "3947"),
    _Locale("ja", "美咲", "佐藤", "佐藤美咲", "佐藤健一", "JPY", "ロサンゼルス", "東京", "Los Angeles", "LAX", "HND",
            "鈴木健太", "高橋さくら", "高橋由美", "高橋さん", "山本翔", "msato", "sakura-2026",
            ("ノートPCの電源が入らない", "今朝から電源ボタンを押しても起動しません。"),
            ("経費精算が差し戻された", "3月分の経費精算が理由なしで差し戻されました。"),
            ("月曜日に本社で会いましょう！", "資料を送ってもらえますか？"), "2756"),
    _Locale("zh", "芳", "王", "王芳", "刘强", "RMB", "纽约", "北京", "New York", "JFK", "PEK", "李伟", "张敏", "张丽",
            "小张", "陈杰", "wangfang", "meihua-2026",
            ("会议室投影仪无法连接", "三楼会议室的投影仪连不上笔记本电脑。"),
            ("报销单被退回", "我三月份的差旅报销单被退回了，没有说明原因。"),
            ("周一总部见！", "能把会议材料发给我吗？"), "8413"),
    _Locale("hi", "प्रिया", "शर्मा", "प्रिया शर्मा", "अर्जुन शर्मा", "INR", "न्यूयॉर्क", "शिकागो", "New York", "JFK",
            "ORD", "राहुल वर्मा", "अनीता गुप्ता", "अनीता सिंह", "अनीता", "विकास मेहता", "psharma", "kamal-2026",
            ("लैपटॉप चार्ज नहीं हो रहा", "कल से चार्जर लगाने पर भी बैटरी नहीं बढ़ती।"),
            ("यात्रा भत्ता अटका हुआ है", "मार्च की यात्रा का भत्ता अब तक नहीं मिला।"),
            ("सोमवार को दफ़्तर में मिलते हैं!", "क्या आप मुझे स्लाइड भेज सकते हैं?"), "1638"),
    _Locale("pt", "Ana", "Souza", "Ana Souza", "Rafael Souza", "BRL", "Nova York", "Los Angeles", "New York",
            "JFK", "LAX", "Pedro Almeida", "Mariana Costa", "Mariana Lima", "Mariana", "Lucas Ferreira", "asouza",
            "Ipe-2026", ("Notebook não liga", "Desde hoje de manhã o notebook não liga."),
            ("Reembolso de viagem atrasado", "O reembolso da viagem a Recife ainda não caiu."),
            ("Até segunda na matriz!", "Pode me mandar os slides?"), "9502"),
)}

# --------------------------------------------------------------------------- states


def _travel(loc: _Locale, *, balance: float = 25000.0, balance2: float | None = None,
            bookings: Sequence[tuple[str, str, str]] = (), budget: float | None = None) -> dict[str, Any]:
    """TravelAPI's state: the user logged in, one card (two with ``balance2``), ``bookings`` as (id, date, class)."""
    cards = {loc.card: {"card_number": f"4{loc.digits}0000{loc.digits}{loc.digits[:3]}", "expiration_date": "08/2029",
                        "cardholder_name": loc.me, "card_verification_number": int(loc.digits[:3]),
                        "balance": balance}}
    if balance2 is not None:
        cards[loc.card2] = {"card_number": f"5{loc.digits[::-1]}1111{loc.digits[::-1]}{loc.digits[1:]}",
                            "expiration_date": "03/2028", "cardholder_name": loc.partner,
                            "card_verification_number": int(loc.digits[1:]), "balance": balance2}
    records = {}
    base = _base_cost(loc.frm_code, loc.to_code)
    for number, (booking_id, date, travel_class) in enumerate(bookings):
        factor = {"economy": 1, "business": 2, "first": 5}[travel_class]
        even = sum(int(ch) for ch in date if ch.isdigit()) % 2 == 0
        records[booking_id] = {"card_id": loc.card, "travel_date": date, "travel_from": loc.frm_code,
                               "travel_to": loc.to_code, "travel_class": travel_class,
                               "travel_cost": float(base * factor * (2 if even else 1)),
                               "transaction_id": f"{loc.digits}{number + 1:04d}"}
    return {"random_seed": int(loc.digits) * 7, "credit_card_list": cards, "booking_record": records,
            "access_token": loc.token, "token_type": "Bearer", "token_expires_in": 3600, "token_scope": "read_write",
            "user_first_name": loc.first, "user_last_name": loc.last, "budget_limit": budget}


def _base_cost(frm: str, to: str) -> int:
    return {("JFK", "BOS"): 250, ("ORD", "BOS"): 200, ("SFO", "LAX"): 200, ("LHR", "CDG"): 100,
            ("SFO", "CIA"): 700, ("LAX", "HND"): 430, ("JFK", "PEK"): 1000, ("JFK", "ORD"): 300,
            ("JFK", "LAX"): 570}[(frm, to)]


def _messages(loc: _Locale) -> dict[str, Any]:
    return {"user_count": 4, "user_map": {loc.me: "USR001", loc.friend: "USR002", loc.amb1: "USR003",
                                          loc.amb2: "USR004"},
            "inbox": [{"USR002": loc.inbox[0]}, {"USR003": loc.inbox[1]}], "message_count": 2,
            "current_user": "USR001", "random_seed": int(loc.digits) * 3}


def _tickets(loc: _Locale, *, logged_in: bool) -> dict[str, Any]:
    if not logged_in:
        return {"ticket_queue": [], "ticket_counter": 12, "current_user": None}
    other = {"en": "jlee", "de": "kmueller", "es": "mgarcia", "fr": "pmartin", "it": "aesposito", "ja": "tkato",
             "zh": "zhaolei", "hi": "rkumar", "pt": "joliveira"}[loc.lang]
    return {"ticket_queue": [
        {"id": 3, "title": loc.ticket_a[0], "description": loc.ticket_a[1], "status": "Open", "priority": 3,
         "created_by": loc.tuser},
        {"id": 4, "title": loc.ticket_b[0], "description": loc.ticket_b[1], "status": "Open", "priority": 2,
         "created_by": loc.tuser},
        {"id": 5, "title": loc.ticket_a[0], "description": loc.ticket_a[1], "status": "Open", "priority": 3,
         "created_by": other},
    ], "ticket_counter": 6, "current_user": loc.tuser}


# --------------------------------------------------------------------------- building one conversation

_BACKEND = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
_MODULES = {"TravelAPI": "travel_booking", "MessageAPI": "message_api", "TicketAPI": "ticket_api"}


class _Conversation:
    """One conversation being built: its state, and per turn the calls, run at once on bfcl-eval's classes."""

    def __init__(self, loc: _Locale, config: dict[str, dict[str, Any]]) -> None:
        self.loc = loc
        self.config = config
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        for name, state in config.items():
            instance = getattr(importlib.import_module(f"{_BACKEND}.{_MODULES[name]}"), name)()
            instance._load_scenario(copy.deepcopy(state), long_context=False)
            self.instances[name] = instance
            self.methods.update({m: getattr(instance, m) for m in dir(instance)
                                 if not m.startswith("_") and callable(getattr(instance, m))})
        self.truth: list[list[dict[str, Any]]] = []
        self.values: dict[str, Any] = {}
        self.no_solution: list[int] = []
        self.clarify: list[int] = []
        self.forbidden: dict[int, list[dict[str, Any]]] = {}

    def turn(self, *calls: tuple[str, dict[str, Any]], no_solution: bool = False, clarify: bool = False
             ) -> list[Any]:
        """Add a turn with these ground-truth calls; run them and return their results."""
        index = len(self.truth)
        if no_solution:
            self.no_solution.append(index)
            assert all(name in READ_ONLY for name, _ in calls), calls
        if clarify:
            self.clarify.append(index)
            assert not calls
        results = []
        for name, arguments in calls:
            result = self.methods[name](**copy.deepcopy(arguments))
            problem = result.get("error") if isinstance(result, dict) else None
            if isinstance(result, list) and result and isinstance(result[0], dict):
                problem = result[0].get("error")
            assert not problem and (not isinstance(result, dict) or result.get("booking_status", True)), \
                (self.loc.lang, name, arguments, result)
            results.append(result)
        self.truth.append([{"name": name, "arguments": copy.deepcopy(args)} for name, args in calls])
        return results

    def to_usd(self, amount: int) -> tuple[list[tuple[str, dict[str, Any]]], float]:
        """The calls converting ``amount`` of the local currency to USD (none in English), and the USD value."""
        if self.loc.currency == "USD":
            return [], float(amount)
        arguments = {"base_currency": self.loc.currency, "target_currency": "USD", "value": amount}
        usd = self.methods["compute_exchange_rate"](**arguments)["exchanged_value"]
        return [("compute_exchange_rate", arguments)], usd

    def cost(self, date: str, travel_class: str) -> float:
        result = self.methods["get_flight_cost"](travel_from=self.loc.frm_code, travel_to=self.loc.to_code,
                                                 travel_date=date, travel_class=travel_class)
        return result["travel_cost_list"][0]


def _flight(loc: _Locale, name: str, date: str, travel_class: str, card: str | None = None
            ) -> tuple[str, dict[str, Any]]:
    if name == "get_flight_cost":
        return name, {"travel_from": loc.frm_code, "travel_to": loc.to_code, "travel_date": date,
                      "travel_class": travel_class}
    return name, {"access_token": loc.token, "card_id": card or loc.card, "travel_date": date,
                  "travel_from": loc.frm_code, "travel_to": loc.to_code, "travel_class": travel_class}


def _send(user: str, user_id: str, message: str) -> list[tuple[str, dict[str, Any]]]:
    return [("get_user_id", {"user": user}), ("send_message", {"receiver_id": user_id, "message": message})]


# --------------------------------------------------------------------------- the 24 templates
# Each takes the locale and the language's texts (``_TEXTS[n][lang]``: the values first, then the turns) and
# returns the built conversation; ``c.values`` fill the turns' {placeholders}.


def _t1(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    c.values["date"] = _date(loc.lang, "2026-05-14")
    c.turn(_flight(loc, "get_flight_cost", "2026-05-14", "economy"))
    booking = c.turn(_flight(loc, "book_flight", "2026-05-14", "economy"))[0]["booking_id"]
    c.turn(("retrieve_invoice", {"access_token": loc.token, "booking_id": booking}))
    return c


def _t2(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    amount = loc.money(2000)
    c.values["amount"] = _money(loc.lang, amount)
    convert, usd = c.to_usd(amount)
    c.turn(*convert, ("set_budget_limit", {"access_token": loc.token, "budget_limit": usd}))
    c.values["date"] = _date(loc.lang, "2026-06-03")
    c.turn(_flight(loc, "book_flight", "2026-06-03", "business"))
    return c


def _t3(loc: _Locale, v: dict[str, str]) -> _Conversation:
    first, second = f"3{loc.digits}01", f"5{loc.digits}17"
    c = _Conversation(loc, {"TravelAPI": _travel(loc, bookings=[(first, "2026-04-08", "economy"),
                                                                 (second, "2026-09-21", "business")])})
    c.values["date"] = _date(loc.lang, "2026-09-21")
    c.turn(("get_booking_history", {"access_token": loc.token}))
    c.turn(("cancel_booking", {"access_token": loc.token, "booking_id": second}))
    c.turn(("get_credit_card_balance", {"access_token": loc.token, "card_id": loc.card}))
    return c


def _t4(loc: _Locale, v: dict[str, str]) -> _Conversation:
    booking = f"4{loc.digits}26"
    c = _Conversation(loc, {"TravelAPI": _travel(loc, bookings=[(booking, "2026-07-11", "economy")])})
    c.values.update(booking=booking, usd=_dollars(loc.lang, 45))
    c.turn(("purchase_insurance", {"access_token": loc.token, "insurance_type": "comprehensive",
                                   "booking_id": booking, "insurance_cost": 45.0, "card_id": loc.card}))
    c.turn(("contact_customer_support", {"booking_id": booking, "message": v["support"]}))
    return c


def _t5(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    c.values["date"] = _date(loc.lang, "2026-10-12")
    target = "CAD" if loc.currency == "USD" else loc.currency
    for travel_class in ("first", "economy"):
        cost = c.cost("2026-10-12", travel_class)
        c.turn(_flight(loc, "get_flight_cost", "2026-10-12", travel_class),
               ("compute_exchange_rate", {"base_currency": "USD", "target_currency": target, "value": cost}))
    c.turn(_flight(loc, "book_flight", "2026-10-12", "economy"))
    return c


def _t6(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"MessageAPI": _messages(loc)})
    c.turn(*_send(loc.friend, "USR002", v["m"]))
    c.turn(("view_messages_sent", {}))
    return c


def _t7(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc), "MessageAPI": _messages(loc)})
    c.values["date"] = _date(loc.lang, "2026-08-19")
    c.turn(_flight(loc, "book_flight", "2026-08-19", "economy"))
    c.turn(*_send(loc.friend, "USR002", v["m"]))
    return c


def _t8(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TicketAPI": _tickets(loc, logged_in=False)})
    c.turn(("ticket_login", {"username": loc.tuser, "password": loc.tpw}),
           ("create_ticket", {"title": v["title"], "description": v["desc"], "priority": 4}))
    c.turn(("edit_ticket", {"ticket_id": 12, "updates": {"priority": 5}}))
    c.turn(("close_ticket", {"ticket_id": 12}))
    return c


def _t9(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TicketAPI": _tickets(loc, logged_in=True)})
    c.turn(("get_user_tickets", {"status": "Open"}))
    c.turn(("resolve_ticket", {"ticket_id": 3, "resolution": v["res"]}))
    return c


def _t10(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    c.values["date"] = _date(loc.lang, "2026-12-02")
    c.turn(("get_nearest_airport_by_city", {"location": loc.frm_en}))
    c.turn(_flight(loc, "book_flight", "2026-12-02", "first"))
    return c


def _t11(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    c.values.update(date=_date(loc.lang, "2026-03-16"), date2=_date(loc.lang, "2026-03-23"))
    results = c.turn(_flight(loc, "book_flight", "2026-03-16", "economy"),
                     _flight(loc, "book_flight", "2026-03-23", "economy"))
    c.turn(("cancel_booking", {"access_token": loc.token, "booking_id": results[0]["booking_id"]}))
    return c


def _t12(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc, balance2=18000.0)})
    c.values["date"] = _date(loc.lang, "2026-11-05")
    c.turn(("get_all_credit_cards", {}))
    c.turn(_flight(loc, "book_flight", "2026-11-05", "economy", card=loc.card2))
    c.turn(("get_credit_card_balance", {"access_token": loc.token, "card_id": loc.card2}))
    return c


def _t13(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc), "TicketAPI": _tickets(loc, logged_in=False)})
    c.values["date"] = _date(loc.lang, "2026-02-10")
    booking = c.turn(_flight(loc, "book_flight", "2026-02-10", "business"))[0]["booking_id"]
    c.turn(("contact_customer_support", {"booking_id": booking, "message": v["support"]}))
    c.turn(("ticket_login", {"username": loc.tuser, "password": loc.tpw}),
           ("create_ticket", {"title": v["title"], "description": v["support"], "priority": 3}))
    c.turn(("get_user_tickets", {"status": "Open"}))
    return c


def _t14(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc), "MessageAPI": _messages(loc)})
    c.values.update(date=_date(loc.lang, "2026-09-08"), usd=_dollars(loc.lang, 30))
    c.turn(("get_credit_card_balance", {"access_token": loc.token, "card_id": loc.card}))
    booking = c.turn(_flight(loc, "book_flight", "2026-09-08", "economy"))[0]["booking_id"]
    c.turn(("purchase_insurance", {"access_token": loc.token, "insurance_type": "basic", "booking_id": booking,
                                   "insurance_cost": 30.0, "card_id": loc.card}))
    c.turn(("get_credit_card_balance", {"access_token": loc.token, "card_id": loc.card}))
    c.turn(*_send(loc.friend, "USR002", v["m"]))
    return c


# no-solution templates

def _t15(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    c.values["date"] = _date(loc.lang, "2026-04-27")
    cost = c.cost("2026-04-27", "business")
    limit = loc.money(cost / 2)
    step = 10 ** max(len(str(limit)) - 2, 0)
    c.values["limit"] = _money(loc.lang, limit // step * step)
    c.turn(_flight(loc, "get_flight_cost", "2026-04-27", "business"), no_solution=True)
    name, arguments = _flight(loc, "book_flight", "2026-04-27", "business")
    c.forbidden[0] = [{"name": name, "arguments": arguments}]
    c.turn(_flight(loc, "book_flight", "2026-04-27", "economy"))
    return c


def _t16(loc: _Locale, v: dict[str, str]) -> _Conversation:
    booking, wrong = f"6{loc.digits}30", f"6{loc.digits}03"
    c = _Conversation(loc, {"TravelAPI": _travel(loc, bookings=[(booking, "2026-05-30", "economy")])})
    c.values.update(booking=booking, wrong=wrong)
    c.turn(no_solution=True)
    c.forbidden[0] = [{"name": "cancel_booking", "arguments": {"access_token": loc.token, "booking_id": booking}}]
    c.turn(("retrieve_invoice", {"access_token": loc.token, "booking_id": booking}))
    return c


def _t17(loc: _Locale, v: dict[str, str]) -> _Conversation:
    base = _base_cost(loc.frm_code, loc.to_code)
    c = _Conversation(loc, {"TravelAPI": _travel(loc, balance=float(base + 100), balance2=15000.0)})
    c.values.update(date=_date(loc.lang, "2026-07-02"), reserve=_money(loc.lang, loc.money(500)))
    assert c.cost("2026-07-02", "economy") == base  # odd digit sum: the base fare
    c.turn(_flight(loc, "get_flight_cost", "2026-07-02", "economy"),
           ("get_credit_card_balance", {"access_token": loc.token, "card_id": loc.card}), no_solution=True)
    name, arguments = _flight(loc, "book_flight", "2026-07-02", "economy")
    c.forbidden[0] = [{"name": name, "arguments": arguments}]
    c.turn(_flight(loc, "book_flight", "2026-07-02", "economy", card=loc.card2))
    return c


def _t18(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"MessageAPI": _messages(loc)})
    c.turn(no_solution=True)
    c.forbidden[0] = [{"name": "add_contact", "arguments": {"user_name": loc.stranger}},
                      {"name": "send_message", "arguments": {"receiver_id": "USR005", "message": v["m"]}}]
    c.turn(*_send(loc.friend, "USR002", v["m"]))
    return c


def _t19(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TicketAPI": _tickets(loc, logged_in=True)})
    c.turn(no_solution=True)
    c.forbidden[0] = [{"name": "close_ticket", "arguments": {"ticket_id": 4}}]
    c.turn(("get_user_tickets", {"status": "Open"}))
    return c


# clarification templates

def _t20(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    c.values["date"] = _date(loc.lang, "2026-06-25")
    c.turn(clarify=True)
    booking = c.turn(_flight(loc, "book_flight", "2026-06-25", "economy"))[0]["booking_id"]
    c.turn(("retrieve_invoice", {"access_token": loc.token, "booking_id": booking}))
    return c


def _t21(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc, balance2=20000.0)})
    c.values["date"] = _date(loc.lang, "2026-08-04")
    c.turn(clarify=True)
    c.turn(_flight(loc, "book_flight", "2026-08-04", "business", card=loc.card2))
    return c


def _t22(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TravelAPI": _travel(loc)})
    amount = loc.money(1500)
    c.values["amount"] = _money(loc.lang, amount)
    c.turn(clarify=True)
    convert, usd = c.to_usd(amount)
    c.turn(*convert, ("set_budget_limit", {"access_token": loc.token, "budget_limit": usd}))
    return c


def _t23(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"MessageAPI": _messages(loc)})
    c.turn(clarify=True)
    c.turn(*_send(loc.amb2, "USR004", v["m"]))
    return c


def _t24(loc: _Locale, v: dict[str, str]) -> _Conversation:
    c = _Conversation(loc, {"TicketAPI": _tickets(loc, logged_in=True)})
    c.turn(clarify=True)
    c.turn(("resolve_ticket", {"ticket_id": 4, "resolution": v["res"]}))
    c.turn(("get_user_tickets", {"status": "Open"}))
    return c


_TEMPLATES: tuple[Callable[[_Locale, dict[str, str]], _Conversation], ...] = (
    _t1, _t2, _t3, _t4, _t5, _t6, _t7, _t8, _t9, _t10, _t11, _t12, _t13, _t14, _t15, _t16, _t17, _t18, _t19, _t20,
    _t21, _t22, _t23, _t24)

# --------------------------------------------------------------------------- the texts
# _TEXTS[n][lang] = (values, turns). The values are exact strings the ground truth carries (message texts,
# ticket titles); they and the turns are filled with the locale's fields ({token}, {card}, {frm}, {to},
# {friend}, ...) and the template's values ({date}, {amount}, {booking}, ...).

_V = dict  # readability below

_TEXTS: dict[int, dict[str, tuple[dict[str, str], list[str]]]] = {
    1: {
        "en": (_V(), ["Hi! My travel access token is {token}. How much is an economy flight from {frm} to {to} on "
                      "{date}?", "Fine, please book it with my card {card}.",
                      "Could you pull up the invoice for that booking?"]),
        "de": (_V(), ["Hallo! Mein Zugangstoken fürs Reiseportal ist {token}. Was kostet ein Economy-Flug von {frm} "
                      "nach {to} am {date}?", "Passt, buch ihn bitte mit meiner Karte {card}.",
                      "Kannst du mir die Rechnung zu dieser Buchung holen?"]),
        "es": (_V(), ["¡Hola! Mi token de acceso de viajes es {token}. ¿Cuánto cuesta un vuelo en clase turista de "
                      "{frm} a {to} el {date}?", "Perfecto, resérvalo con mi tarjeta {card}.",
                      "¿Me enseñas la factura de esa reserva?"]),
        "fr": (_V(), ["Bonjour ! Mon jeton d'accès voyage est {token}. Combien coûte un vol en classe économique de "
                      "{frm} à {to} le {date} ?", "Très bien, réservez-le avec ma carte {card}, s'il vous plaît.",
                      "Pouvez-vous me sortir la facture de cette réservation ?"]),
        "it": (_V(), ["Ciao! Il mio token di accesso per i viaggi è {token}. Quanto costa un volo in economy da {frm} "
                      "a {to} il {date}?", "Va bene, prenotalo con la mia carta {card}.",
                      "Mi recuperi la fattura di questa prenotazione?"]),
        "ja": (_V(), ["こんにちは。旅行サービスのアクセストークンは{token}です。{date}の{frm}発{to}行きのエコノミー便"
                      "はいくらですか？",
                      "では、カード{card}で予約してください。", "その予約の請求書を出してもらえますか？"]),
        "zh": (_V(), ["你好！我的出行账户访问令牌是{token}。{date}从{frm}飞{to}的经济舱机票多少钱？",
                      "好的，请用我的卡{card}订这张票。", "能帮我调出这笔预订的发票吗？"]),
        "hi": (_V(), ["नमस्ते! मेरा ट्रैवल एक्सेस टोकन {token} है। {date} को {frm} से {to} की इकॉनमी फ़्लाइट कितने की है?",
                      "ठीक है, इसे मेरे कार्ड {card} से बुक कर दीजिए।", "क्या आप उस बुकिंग का इनवॉइस निकाल सकते हैं?"]),
        "pt": (_V(), ["Oi! Meu token de acesso de viagens é {token}. Quanto custa um voo na classe econômica de {frm} "
                      "para {to} em {date}?", "Ótimo, reserve com o meu cartão {card}, por favor.",
                      "Você pode puxar a fatura dessa reserva?"]),
    },
    2: {
        "en": (_V(), ["My access token is {token}. Please set my travel budget to {amount}.",
                      "Now book a business class flight from {frm} to {to} on {date} with my card {card}."]),
        "de": (_V(), ["Mein Zugangstoken ist {token}. Setz bitte mein Reisebudget auf {amount}.",
                      "Jetzt buch mir bitte einen Business-Class-Flug von {frm} nach {to} am {date}, mit meiner "
                      "Karte {card}."]),
        "es": (_V(), ["Mi token de acceso es {token}. Pon mi presupuesto de viaje en {amount}, por favor.",
                      "Ahora resérvame un vuelo en business de {frm} a {to} el {date} con mi tarjeta {card}."]),
        "fr": (_V(), ["Mon jeton d'accès est {token}. Fixez mon budget voyage à {amount}, s'il vous plaît.",
                      "Maintenant, réservez-moi un vol en classe affaires de {frm} à {to} le {date} avec ma carte "
                      "{card}."]),
        "it": (_V(), ["Il mio token di accesso è {token}. Imposta il mio budget di viaggio a {amount}, per favore.",
                      "Ora prenotami un volo in business da {frm} a {to} il {date} con la mia carta {card}."]),
        "ja": (_V(), ["アクセストークンは{token}です。出張の予算を{amount}に設定してください。",
                      "次に、{date}の{frm}発{to}行きのビジネスクラス便をカード{card}で予約してください。"]),
        "zh": (_V(), ["我的访问令牌是{token}。请把我的差旅预算设为{amount}。",
                      "然后用我的卡{card}订一张{date}从{frm}到{to}的商务舱机票。"]),
        "hi": (_V(), ["मेरा एक्सेस टोकन {token} है। कृपया मेरा यात्रा बजट {amount} पर सेट कर दीजिए।",
                      "अब {date} को {frm} से {to} की बिज़नेस क्लास फ़्लाइट मेरे कार्ड {card} से बुक कर दीजिए।"]),
        "pt": (_V(), ["Meu token de acesso é {token}. Defina meu orçamento de viagem em {amount}, por favor.",
                      "Agora reserve um voo na classe executiva de {frm} para {to} em {date} com o meu cartão "
                      "{card}."]),
    },
    3: {
        "en": (_V(), ["Token: {token}. Can you show me all my flight bookings?", "Cancel the one on {date}, please.",
                      "What's the balance on my card {card} now?"]),
        "de": (_V(), ["Token: {token}. Zeig mir bitte alle meine Flugbuchungen.", "Storniere bitte die am {date}.",
                      "Wie hoch ist jetzt das Guthaben auf meiner Karte {card}?"]),
        "es": (_V(), ["Token: {token}. ¿Me muestras todas mis reservas de vuelos?", "Cancela la del {date}, por favor.",
                      "¿Cuál es ahora el saldo de mi tarjeta {card}?"]),
        "fr": (_V(), ["Jeton : {token}. Pouvez-vous m'afficher toutes mes réservations de vol ?",
                      "Annulez celle du {date}, s'il vous"
                      " plaît.", "Quel est maintenant le solde de ma carte {card} ?"]),
        "it": (_V(), ["Token: {token}. Mi mostri tutte le mie prenotazioni di volo?", "Cancella quella del {date}, per "
                      "favore.", "Qual è adesso il saldo della mia carta {card}?"]),
        "ja": (_V(), ["トークンは{token}です。私のフライト予約を全部見せてください。", "{date}の便をキャンセルしてくだ"
                                                                                       "さい。",
                      "今、カード{card}の残高はいくらですか？"]),
        "zh": (_V(), ["令牌：{token}。帮我看看我所有的机票预订。", "请取消{date}的那一班。", "现在我的卡{card}余额是多"
                                                                                             "少？"]),
        "hi": (_V(), ["टोकन: {token}। मेरी सारी फ़्लाइट बुकिंग दिखाइए।", "{date} वाली बुकिंग रद्द कर दीजिए।",
                      "अब मेरे कार्ड {card} में कितना बैलेंस है?"]),
        "pt": (_V(), ["Token: {token}. Pode me mostrar todas as minhas reservas de voo?",
                      "Cancele a do dia {date}, por favor.", "Qual é o saldo do meu cartão {card} agora?"]),
    },
    4: {
        "en": (_V(support="My flight is delayed by five hours. Can I rebook without a fee?"),
               ["My token is {token}. Please buy 'comprehensive' travel insurance for booking {booking}; it costs "
                "{usd}, charge it to card {card}.",
                "Also contact customer support about booking {booking} with this message: \"{support}\""]),
        "de": (_V(support="Mein Flug hat fünf Stunden Verspätung. Kann ich kostenlos umbuchen?"),
               ["Mein Token ist {token}. Schließ bitte für die Buchung {booking} die Reiseversicherung vom Typ "
                "„comprehensive“ ab; sie kostet {usd}, zahl mit der Karte {card}.",
                "Schreib außerdem dem Kundenservice zur Buchung {booking}: „{support}“"]),
        "es": (_V(support="Mi vuelo lleva cinco horas de retraso. ¿Puedo cambiarlo sin coste?"),
               ["Mi token es {token}. Contrata el seguro de viaje \"comprehensive\" para la reserva {booking}; cuesta "
                "{usd}, cárgalo a la tarjeta {card}.",
                "Y contacta con atención al cliente sobre la reserva {booking} con este mensaje: \"{support}\""]),
        "fr": (_V(support="Mon vol a cinq heures de retard. Puis-je le modifier sans frais ?"),
               ["Mon jeton est {token}. Souscrivez l'assurance voyage « comprehensive » pour la réservation "
                "{booking} ; elle coûte {usd}, à débiter sur la carte {card}.",
                "Contactez aussi le service client au sujet de la réservation {booking} avec ce message : "
                "« {support} »"]),
        "it": (_V(support="Il mio volo ha cinque ore di ritardo. Posso cambiarlo senza penali?"),
               ["Il mio token è {token}. Acquista l'assicurazione di viaggio \"comprehensive\" per la prenotazione "
                "{booking}; costa {usd}, addebitala sulla carta {card}.",
                "Contatta anche l'assistenza clienti per la prenotazione {booking} con questo messaggio: "
                "\"{support}\""]),
        "ja": (_V(support="フライトが5時間遅れています。無料で変更できますか？"),
               ["トークンは{token}です。予約{booking}に「comprehensive」タイプの旅行保険を付けてください。料金は{usd}で、"
                "カード{card}で支払います。", "あと、予約{booking}についてカスタマーサポートに「{support}」と連絡して"
                                              "ください。"]),
        "zh": (_V(support="我的航班延误了五个小时，可以免费改签吗？"),
               ["我的令牌是{token}。请为预订{booking}购买“comprehensive”旅行保险，价格{usd}，用卡{card}支付。",
                "另外就预订{booking}联系客服，留言：“{support}”"]),
        "hi": (_V(support="मेरी फ़्लाइट पाँच घंटे लेट है। क्या मैं बिना शुल्क के बदलाव कर सकती हूँ?"),
               ["मेरा टोकन {token} है। बुकिंग {booking} के लिए \"comprehensive\" यात्रा बीमा ले लीजिए; इसकी कीमत {usd} "
                "है, कार्ड {card} से भुगतान कीजिए।",
                "साथ ही बुकिंग {booking} के बारे में कस्टमर सपोर्ट को यह संदेश भेजिए: \"{support}\""]),
        "pt": (_V(support="Meu voo está cinco horas atrasado. Posso remarcar sem taxa?"),
               ["Meu token é {token}. Contrate o seguro viagem \"comprehensive\" para a reserva {booking}; custa "
                "{usd}, cobre no cartão {card}.",
                "E fale com o atendimento ao cliente sobre a reserva {booking} com esta mensagem: \"{support}\""]),
    },
    5: {
        "en": (_V(), ["Token {token}. What would a first-class ticket from {frm} to {to} on {date} cost in Canadian "
                      "dollars?", "That's too much. What about economy, in Canadian dollars too?",
                      "OK, book the economy one with card {card}."]),
        "de": (_V(), ["Token {token}. Was kostet ein Erste-Klasse-Ticket von {frm} nach {to} am {date} umgerechnet in "
                      "Euro?", "Zu teuer. Und in der Economy, ebenfalls in Euro?",
                      "Gut, dann buch die Economy mit der Karte {card}."]),
        "es": (_V(), ["Token {token}. ¿Cuánto costaría en euros un billete en primera clase de {frm} a {to} el "
                      "{date}?", "Es demasiado. ¿Y en clase turista, también en euros?",
                      "Vale, reserva el de turista con la tarjeta {card}."]),
        "fr": (_V(), ["Jeton {token}. Combien coûterait en euros un billet en première classe de {frm} à {to} le "
                      "{date} ?", "C'est trop cher. Et en classe économique, toujours en euros ?",
                      "D'accord, réservez l'économique avec la carte {card}."]),
        "it": (_V(), ["Token {token}. Quanto costerebbe in euro un biglietto in prima classe da {frm} a {to} il "
                      "{date}?", "Troppo caro. E in economy, sempre in euro?",
                      "Ok, prenota quello in economy con la carta {card}."]),
        "ja": (_V(), ["トークン{token}。{date}の{frm}発{to}行きのファーストクラスは日本円でいくらになりますか？",
                      "高すぎますね。エコノミーだと円でいくらですか？", "では、エコノミーをカード{card}で予約してくだ"
                                                                        "さい。"]),
        "zh": (_V(), ["令牌{token}。{date}从{frm}到{to}的头等舱换算成人民币要多少钱？", "太贵了。经济舱换成人民币是多"
                                                                                        "少？",
                      "好，那就用卡{card}订经济舱。"]),
        "hi": (_V(), ["टोकन {token}। {date} को {frm} से {to} का फ़र्स्ट क्लास टिकट भारतीय रुपये में कितने का पड़ेगा?",
                      "यह बहुत महँगा है। इकॉनमी रुपये में कितने की है?", "ठीक है, इकॉनमी वाली कार्ड {card} से बुक कर दीजिए।"]),
        "pt": (_V(), ["Token {token}. Quanto custaria em reais uma passagem de primeira classe de {frm} para {to} em "
                      "{date}?", "Caro demais. E na econômica, também em reais?",
                      "Beleza, reserve a econômica com o cartão {card}."]),
    },
    6: {
        "en": (_V(m="The client meeting moved to Thursday at 10."),
               ["Please send {friend} this message: \"{m}\"", "Which messages have I sent so far?"]),
        "de": (_V(m="Das Kundentreffen ist auf Donnerstag um 10 Uhr verschoben."),
               ["Schick {friend} eine Nachricht: „{m}“", "Welche Nachrichten habe ich bisher verschickt?"]),
        "es": (_V(m="La reunión con el cliente pasa al jueves a las 10."),
               ["Mándale a {friend} este mensaje: \"{m}\"", "¿Qué mensajes he enviado hasta ahora?"]),
        "fr": (_V(m="La réunion client est décalée à jeudi 10 h."),
               ["Envoie ce message à {friend} : « {m} »", "Quels messages ai-je envoyés jusqu'ici ?"]),
        "it": (_V(m="La riunione con il cliente è spostata a giovedì alle 10."),
               ["Manda a {friend} questo messaggio: \"{m}\"", "Quali messaggi ho inviato finora?"]),
        "ja": (_V(m="顧客との打ち合わせは木曜10時に変更になりました。"),
               ["{friend}さんに「{m}」とメッセージを送ってください。", "これまでに送ったメッセージを見せてください。"]),
        "zh": (_V(m="客户会议改到周四上午十点了。"), ["给{friend}发一条消息：“{m}”", "我到目前为止都发过哪些消息？"]),
        "hi": (_V(m="क्लाइंट मीटिंग अब गुरुवार सुबह 10 बजे है।"),
               ["{friend} को यह संदेश भेजिए: \"{m}\"", "मैंने अब तक कौन-कौन से संदेश भेजे हैं?"]),
        "pt": (_V(m="A reunião com o cliente mudou para quinta às 10h."),
               ["Manda para o {friend} esta mensagem: \"{m}\"", "Quais mensagens eu já enviei?"]),
    },
    7: {
        "en": (_V(m="Flight booked, see you in {to}!"),
               ["Token {token}: book me an economy flight from {frm} to {to} on {date}, card {card}.",
                "Great, thanks. Now send {friend} a message: \"{m}\""]),
        "de": (_V(m="Flug ist gebucht, wir sehen uns in {to}!"),
               ["Token {token}: Buch mir einen Economy-Flug von {frm} nach {to} am {date}, Karte {card}.",
                "Super. Jetzt schreib {friend}: „{m}“"]),
        "es": (_V(m="¡Vuelo reservado, nos vemos en {to}!"),
               ["Token {token}: resérvame un vuelo en turista de {frm} a {to} el {date}, tarjeta {card}.",
                "Genial. Ahora escríbele a {friend}: \"{m}\""]),
        "fr": (_V(m="Vol réservé, on se voit à {to} !"),
               ["Jeton {token} : réserve-moi un vol en économique de {frm} à {to} le {date}, carte {card}.",
                "Parfait. Maintenant écris à {friend} : « {m} »"]),
        "it": (_V(m="Volo prenotato, ci vediamo a {to}!"),
               ["Token {token}: prenotami un volo in economy da {frm} a {to} il {date}, carta {card}.",
                "Perfetto. Ora scrivi a {friend}: \"{m}\""]),
        "ja": (_V(m="飛行機を予約しました。{to}で会いましょう！"),
               ["トークン{token}で、{date}の{frm}発{to}行きエコノミー便をカード{card}で予約してください。",
                "ありがとう。{friend}さんに「{m}」と送っておいてください。"]),
        "zh": (_V(m="机票订好了，{to}见！"),
               ["令牌{token}：帮我用卡{card}订一张{date}从{frm}到{to}的经济舱。", "好。再给{friend}发消息：“{m}”"]),
        "hi": (_V(m="फ़्लाइट बुक हो गई, {to} में मिलते हैं!"),
               ["टोकन {token}: {date} को {frm} से {to} की इकॉनमी फ़्लाइट कार्ड {card} से बुक कर दीजिए।",
                "बढ़िया। अब {friend} को संदेश भेजिए: \"{m}\""]),
        "pt": (_V(m="Voo reservado, nos vemos em {to}!"),
               ["Token {token}: reserve um voo na econômica de {frm} para {to} em {date}, cartão {card}.",
                "Ótimo. Agora manda uma mensagem para o {friend}: \"{m}\""]),
    },
    8: {
        "en": (_V(title="Cannot access shared drive", desc="Since this morning the team drive says: access denied."),
               ["Log me into the ticket system (user {tuser}, password {tpw}) and open a ticket titled \"{title}\" "
                "with the description \"{desc}\", priority 4.",
                "Actually it's blocking my work, raise it to priority"
                " 5.", "It works again, you can close the ticket."]),
        "de": (_V(title="Kein Zugriff auf das Teamlaufwerk",
                  desc="Seit heute Morgen meldet das Teamlaufwerk: Zugriff verweigert."),
               ["Melde mich im Ticketsystem an (Benutzer {tuser}, Passwort {tpw}) und eröffne ein Ticket mit dem "
                "Titel „{title}“ und der Beschreibung „{desc}“, Priorität 4.",
                "Das blockiert meine Arbeit, setz die Priorität auf 5 hoch.",
                "Es geht wieder, du kannst das Ticket schließen."]),
        "es": (_V(title="Sin acceso a la unidad compartida",
                  desc="Desde esta mañana la unidad del equipo me dice: acceso denegado."),
               ["Entra en el sistema de tickets (usuario {tuser}, contraseña {tpw}) y abre un ticket con el título "
                "\"{title}\" y la descripción \"{desc}\", prioridad 4.",
                "Me está bloqueando el trabajo, súbelo a prioridad 5.", "Ya funciona, puedes cerrar el ticket."]),
        "fr": (_V(title="Accès impossible au lecteur partagé",
                  desc="Depuis ce matin, le lecteur de l'équipe affiche : accès refusé."),
               ["Connecte-moi au système de tickets (utilisateur {tuser}, mot de passe {tpw}) et ouvre un ticket "
                "intitulé « {title} » avec la description « {desc} », priorité 4.",
                "En fait ça bloque mon travail, passe-le en priorité 5.", "Ça remarche, tu peux fermer le ticket."]),
        "it": (_V(title="Nessun accesso all'unità condivisa",
                  desc="Da stamattina l'unità del team mi dice: accesso negato."),
               ["Accedi al sistema di ticket (utente {tuser}, password {tpw}) e apri un ticket con titolo \"{title}\" "
                "e descrizione \"{desc}\", priorità 4.", "Mi sta bloccando il lavoro, alza la priorità a 5.",
                "Ora funziona, puoi chiudere il ticket."]),
        "ja": (_V(title="共有ドライブにアクセスできない", desc="今朝からチームのドライブで『アクセス拒否』と表示されま"
                                                               "す。"),
               ["チケットシステムにログインして（ユーザー名{tuser}、パスワード{tpw}）、件名「{title}」、説明「{desc}」、"
                "優先度4でチケットを作成してください。", "仕事が止まっているので、優先度を5に上げてください。",
                "直りました。チケットをクローズしてください。"]),
        "zh": (_V(title="无法访问共享盘", desc="从今天早上开始，团队共享盘提示‘拒绝访问’。"),
               ["帮我登录工单系统（用户名{tuser}，密码{tpw}），新建一个工单，标题“{title}”，描述“{desc}”，优先级4。",
                "这个已经影响工作了，把优先级提到5。", "已经恢复了，可以关闭这个工单。"]),
        "hi": (_V(title="शेयर्ड ड्राइव नहीं खुल रही", desc="आज सुबह से टीम ड्राइव पर 'एक्सेस अस्वीकृत' दिख रहा है।"),
               ["टिकट सिस्टम में लॉग इन कीजिए (यूज़र {tuser}, पासवर्ड {tpw}) और \"{title}\" शीर्षक से एक टिकट खोलिए, "
                "विवरण \"{desc}\", प्राथमिकता 4।", "इससे मेरा काम रुका हुआ है, प्राथमिकता 5 कर दीजिए।",
                "अब ठीक हो गया, टिकट बंद कर दीजिए।"]),
        "pt": (_V(title="Sem acesso ao drive compartilhado", desc="Desde hoje cedo o drive da equipe mostra: acesso "
                  "negado."),
               ["Entra no sistema de chamados (usuário {tuser}, senha {tpw}) e abre um chamado com o título "
                "\"{title}\" e a descrição \"{desc}\", prioridade 4.", "Isso está travando meu trabalho, sobe para "
                "prioridade 5.", "Voltou a funcionar, pode fechar o chamado."]),
    },
    9: {
        "en": (_V(res="Battery replaced under warranty."),
               ["Which of my support tickets are still open?",
                "The one about \"{ta}\" is fixed. Mark it resolved with: \"{res}\""]),
        "de": (_V(res="VPN-Profil neu eingerichtet, die Verbindung hält jetzt."),
               ["Welche meiner Support-Tickets sind noch offen?",
                "Das Ticket „{ta}“ ist erledigt. Markiere es als gelöst mit: „{res}“"]),
        "es": (_V(res="Cargador sustituido."),
               ["¿Qué tickets de soporte tengo todavía abiertos?",
                "El de \"{ta}\" ya está arreglado. Márcalo como resuelto con: \"{res}\""]),
        "fr": (_V(res="Badge réactivé par l'accueil."),
               ["Lesquels de mes tickets de support sont encore ouverts ?",
                "Celui sur « {ta} » est réglé. Marque-le comme résolu avec : « {res} »"]),
        "it": (_V(res="Stampante riparata dal tecnico."),
               ["Quali dei miei ticket di assistenza sono ancora aperti?",
                "Quello su \"{ta}\" è sistemato. Segnalalo come risolto con: \"{res}\""]),
        "ja": (_V(res="PCを新品に交換済み。"),
               ["まだ対応中のサポートチケットはどれですか？", "「{ta}」の件は解決しました。解決内容「{res}」で解決済み"
                                                              "にしてください。"]),
        "zh": (_V(res="已更换投影仪连接线。"),
               ["我还有哪些支持工单没处理完？", "“{ta}”那个已经好了，标记为已解决，处理说明写“{res}”"]),
        "hi": (_V(res="नया चार्जर दे दिया गया।"),
               ["मेरे कौन-से सपोर्ट टिकट अभी खुले हैं?", "\"{ta}\" वाला ठीक हो गया है। उसे इस समाधान के साथ हल कर दीजि"
                                                         "ए: \"{res}\""]),
        "pt": (_V(res="Notebook trocado pela TI."),
               ["Quais dos meus chamados de suporte ainda estão abertos?",
                "O de \"{ta}\" foi resolvido. Marque como resolvido com: \"{res}\""]),
    },
    10: {
        "en": (_V(), ["Token {token}. Which airport is closest to {frm}?",
                      "Book me a first-class flight from there to {to} on {date}, card {card}."]),
        "de": (_V(), ["Token {token}. Welcher Flughafen liegt am nächsten an {frm}?",
                      "Buch mir von dort einen Erste-Klasse-Flug nach {to} am {date}, Karte {card}."]),
        "es": (_V(), ["Token {token}. ¿Cuál es el aeropuerto más cercano a {frm}?",
                      "Resérvame desde ahí un vuelo en primera clase a {to} el {date}, tarjeta {card}."]),
        "fr": (_V(), ["Jeton {token}. Quel est l'aéroport le plus proche de {frm} ?",
                      "Réserve-moi au départ de là un vol en première classe pour {to} le {date}, carte {card}."]),
        "it": (_V(), ["Token {token}. Qual è l'aeroporto più vicino a {frm}?",
                      "Prenotami da lì un volo in prima classe per {to} il {date}, carta {card}."]),
        "ja": (_V(), ["トークン{token}。{frm}に一番近い空港はどこですか？",
                      "そこから{to}まで、{date}のファーストクラスをカード{card}で予約してください。"]),
        "zh": (_V(), ["令牌{token}。离{frm}最近的机场是哪个？", "从那里订一张{date}去{to}的头等舱，用卡{card}。"]),
        "hi": (_V(), ["टोकन {token}। {frm} के सबसे पास कौन-सा हवाई अड्डा है?",
                      "वहाँ से {date} को {to} के लिए फ़र्स्ट क्लास फ़्लाइट कार्ड {card} से बुक कर दीजिए।"]),
        "pt": (_V(), ["Token {token}. Qual é o aeroporto mais próximo de {frm}?",
                      "Reserve para mim, saindo de lá, um voo de primeira classe para {to} em {date}, cartão {card}."]),
    },
    11: {
        "en": (_V(), ["Token {token}. Book two economy flights from {frm} to {to} with card {card}: one on {date} and "
                      "one on {date2}.", "Plans changed: cancel the {date} one."]),
        "de": (_V(), ["Token {token}. Buch mir zwei Economy-Flüge von {frm} nach {to} mit der Karte {card}: einen am "
                      "{date} und einen am {date2}.", "Planänderung: Storniere den Flug am {date}."]),
        "es": (_V(), ["Token {token}. Resérvame dos vuelos en turista de {frm} a {to} con la tarjeta {card}: uno el "
                      "{date} y otro el {date2}.", "Cambio de planes: cancela el del {date}."]),
        "fr": (_V(), ["Jeton {token}. Réserve-moi deux vols en économique de {frm} à {to} avec la carte {card} : un le "
                      "{date} et un le {date2}.", "Changement de programme : annule celui du {date}."]),
        "it": (_V(), ["Token {token}. Prenotami due voli in economy da {frm} a {to} con la carta {card}: uno il {date} "
                      "e uno il {date2}.", "Cambio di programma: cancella quello del {date}."]),
        "ja": (_V(), ["トークン{token}。{frm}発{to}行きのエコノミー便を2本、カード{card}で予約してください。{date}"
                      "と{date2}です。",
                      "予定が変わりました。{date}の便をキャンセルしてください。"]),
        "zh": (_V(), ["令牌{token}。用卡{card}订两张从{frm}到{to}的经济舱：一张{date}，一张{date2}。", "计划有变，"
                                                                                                       "把{date}那张取消。"]),
        "hi": (_V(), ["टोकन {token}। कार्ड {card} से {frm} से {to} की दो इकॉनमी फ़्लाइट बुक कीजिए: एक {date} की और एक "
                      "{date2} की।", "प्लान बदल गया है: {date} वाली रद्द कर दीजिए।"]),
        "pt": (_V(), ["Token {token}. Reserve duas passagens na econômica de {frm} para {to} com o cartão {card}: uma "
                      "em {date} e outra em {date2}.", "Mudança de planos: cancele a de {date}."]),
    },
    12: {
        "en": (_V(), ["Token {token}. Which credit cards do I have registered?",
                      "Book an economy flight from {frm} to {to} on {date} with {partner}'s card.",
                      "How much is left on that card now?"]),
        "de": (_V(), ["Token {token}. Welche Kreditkarten habe ich hinterlegt?",
                      "Buch einen Economy-Flug von {frm} nach {to} am {date} mit der Karte von {partner}.",
                      "Wie viel ist jetzt noch auf dieser Karte?"]),
        "es": (_V(), ["Mi token es {token}. ¿Qué tarjetas de crédito tengo registradas?",
                      "Reserva un vuelo en turista de {frm} a {to} el {date} con la tarjeta de {partner}.",
                      "¿Cuánto queda ahora en esa tarjeta?"]),
        "fr": (_V(), ["Jeton {token}. Quelles cartes bancaires ai-je enregistrées ?",
                      "Réserve un vol en économique de {frm} à {to} le {date} avec la carte de {partner}.",
                      "Combien reste-t-il maintenant sur cette carte ?"]),
        "it": (_V(), ["Token {token}. Quali carte di credito ho registrato?",
                      "Prenota un volo in economy da {frm} a {to} il {date} con la carta di {partner}.",
                      "Quanto resta adesso su quella carta?"]),
        "ja": (_V(), ["トークン{token}。登録してあるクレジットカードを教えてください。",
                      "{date}の{frm}発{to}行きエコノミー便を、{partner}名義のカードで予約してください。",
                      "そのカードの残高は今いくらですか？"]),
        "zh": (_V(), ["令牌{token}。我登记了哪些信用卡？", "用{partner}的那张卡订一张{date}从{frm}到{to}的经济舱。",
                      "那张卡现在还剩多少钱？"]),
        "hi": (_V(), ["टोकन {token}। मेरे कौन-कौन से क्रेडिट कार्ड रजिस्टर्ड हैं?",
                      "{partner} वाले कार्ड से {date} को {frm} से {to} की इकॉनमी फ़्लाइट बुक कीजिए।",
                      "अब उस कार्ड में कितना बचा है?"]),
        "pt": (_V(), ["Token {token}. Quais cartões de crédito eu tenho cadastrados?",
                      "Reserve um voo na econômica de {frm} para {to} em {date} com o cartão do {partner}.",
                      "Quanto sobrou nesse cartão agora?"]),
    },
    13: {
        "en": (_V(support="Please add a vegetarian meal to my booking.", title="Vegetarian meal request"),
               ["Token {token}. Book a business-class flight from {frm} to {to} on {date} with card {card}.",
                "Tell customer support about this booking: \"{support}\"",
                "Also open a ticket so it's tracked: log in as {tuser} with password {tpw}, title \"{title}\", the "
                "same text as description, priority 3.", "Which of my tickets are open now?"]),
        "de": (_V(support="Bitte fügen Sie meiner Buchung ein vegetarisches Menü hinzu.",
                  title="Vegetarisches Menü anfragen"),
               ["Token {token}. Buch einen Business-Class-Flug von {frm} nach {to} am {date} mit der Karte {card}.",
                "Gib dem Kundenservice zu dieser Buchung Bescheid: „{support}“",
                "Leg zur Nachverfolgung auch ein Ticket an: Anmeldung als {tuser} mit Passwort {tpw}, Titel "
                "„{title}“, derselbe Text als Beschreibung, Priorität 3.", "Welche meiner Tickets sind jetzt offen?"]),
        "es": (_V(support="Por favor, añadan un menú vegetariano a mi reserva.", title="Solicitud de menú vegetariano"),
               ["Token {token}. Reserva un vuelo en business de {frm} a {to} el {date} con la tarjeta {card}.",
                "Escribe a atención al cliente sobre esta reserva: \"{support}\"",
                "Abre también un ticket para hacer seguimiento: entra como {tuser} con la contraseña {tpw}, título "
                "\"{title}\", el mismo texto como descripción, prioridad 3.", "¿Qué tickets tengo abiertos ahora?"]),
        "fr": (_V(support="Merci d'ajouter un repas végétarien à ma réservation.", title="Demande de repas végétarien"),
               ["Jeton {token}. Réserve un vol en classe affaires de {frm} à {to} le {date} avec la carte {card}.",
                "Contacte le service client au sujet de cette réservation : « {support} »",
                "Ouvre aussi un ticket pour le suivi : connexion en tant que {tuser} avec le mot de passe {tpw}, titre "
                "« {title} », le même texte en description, priorité"
                " 3.", "Quels tickets ai-je d'ouverts maintenant ?"]),
        "it": (_V(support="Per favore aggiungete un pasto vegetariano alla mia prenotazione.",
                  title="Richiesta pasto vegetariano"),
               ["Token {token}. Prenota un volo in business da {frm} a {to} il {date} con la carta {card}.",
                "Contatta l'assistenza clienti per questa prenotazione: \"{support}\"",
                "Apri anche un ticket per seguirla: accedi come {tuser} con password {tpw}, titolo \"{title}\", lo "
                "stesso testo come descrizione, priorità 3.", "Quali ticket ho aperti adesso?"]),
        "ja": (_V(support="予約にベジタリアン機内食を追加してください。", title="ベジタリアン機内食のリクエスト"),
               ["トークン{token}。{date}の{frm}発{to}行きビジネスクラスをカード{card}で予約してください。",
                "この予約についてカスタマーサポートに連絡してください：「{support}」",
                "記録のためチケットも作成してください。ユーザー名{tuser}、パスワード{tpw}でログインし、件名「{title}」、"
                "説明は同じ文面、優先度3です。", "今オープンになっている私のチケットはどれですか？"]),
        "zh": (_V(support="请在我的预订中加一份素食餐。", title="素食餐申请"),
               ["令牌{token}。用卡{card}订一张{date}从{frm}到{to}的商务舱。", "就这笔预订联系一下客服：“{support}”",
                "再开个工单方便跟进：用{tuser}登录，密码{tpw}，标题“{title}”，描述用同样的文字，优先级3。",
                "我现在有哪些未关闭的工单？"]),
        "hi": (_V(support="कृपया मेरी बुकिंग में शाकाहारी भोजन जोड़ दें।", title="शाकाहारी भोजन का अनुरोध"),
               ["टोकन {token}। {date} को {frm} से {to} की बिज़नेस क्लास फ़्लाइट कार्ड {card} से बुक कीजिए।",
                "इस बुकिंग के बारे में कस्टमर सपोर्ट को बताइए: \"{support}\"",
                "ट्रैक करने के लिए एक टिकट भी खोलिए: {tuser} से लॉग इन कीजिए, पासवर्ड {tpw}, शीर्षक \"{title}\", विवरण "
                "में वही संदेश, प्राथमिकता 3।", "अब मेरे कौन-से टिकट खुले हैं?"]),
        "pt": (_V(support="Por favor, incluam uma refeição vegetariana na minha reserva.",
                  title="Pedido de refeição vegetariana"),
               ["Token {token}. Reserve um voo na executiva de {frm} para {to} em {date} com o cartão {card}.",
                "Avise o atendimento ao cliente sobre esta reserva: \"{support}\"",
                "Abra também um chamado para acompanhar: entre como {tuser} com a senha {tpw}, título \"{title}\", o "
                "mesmo texto na descrição, prioridade 3.", "Quais chamados meus estão abertos agora?"]),
    },
    14: {
        "en": (_V(m="Trip to {to} is booked, insurance included."),
               ["Token {token}. What's the balance on my card {card}?",
                "Book an economy flight from {frm} to {to} on {date} with that card.",
                "Add 'basic' travel insurance to that booking for {usd}, same card.", "What's the balance now?",
                "Please let {friend} know: \"{m}\""]),
        "de": (_V(m="Die Reise nach {to} ist gebucht, inklusive Versicherung."),
               ["Token {token}. Wie hoch ist das Guthaben auf meiner Karte {card}?",
                "Buch mit dieser Karte einen Economy-Flug von {frm} nach {to} am {date}.",
                "Schließ für diese Buchung die Versicherung „basic“ für {usd} ab, gleiche Karte.",
                "Wie hoch ist das Guthaben jetzt?", "Sag {friend} Bescheid: „{m}“"]),
        "es": (_V(m="El viaje a {to} está reservado, con seguro incluido."),
               ["Token {token}. ¿Cuál es el saldo de mi tarjeta {card}?",
                "Reserva con esa tarjeta un vuelo en turista de {frm} a {to} el {date}.",
                "Añade a esa reserva el seguro \"basic\" por {usd}, con la misma"
                " tarjeta.", "¿Y cuál es el saldo ahora?",
                "Avísale a {friend}: \"{m}\""]),
        "fr": (_V(m="Le voyage à {to} est réservé, assurance comprise."),
               ["Jeton {token}. Quel est le solde de ma carte {card} ?",
                "Réserve avec cette carte un vol en économique de {frm} à {to} le {date}.",
                "Ajoute à cette réservation l'assurance « basic » pour {usd}, même carte.",
                "Quel est le solde maintenant ?", "Préviens {friend} : « {m} »"]),
        "it": (_V(m="Il viaggio a {to} è prenotato, assicurazione inclusa."),
               ["Token {token}. Qual è il saldo della mia carta {card}?",
                "Prenota con questa carta un volo in economy da {frm} a {to} il {date}.",
                "Aggiungi a questa prenotazione l'assicurazione \"basic\" da {usd}, stessa carta.",
                "E adesso qual è il saldo?", "Avvisa {friend}: \"{m}\""]),
        "ja": (_V(m="{to}行きの旅行、保険込みで予約完了です。"),
               ["トークン{token}。カード{card}の残高はいくらですか？", "そのカードで{date}の{frm}発{to}行きエコノミー"
                                                                       "便を予約してください。",
                "その予約に「basic」の旅行保険を{usd}で付けてください。支払いは同じカードで。", "今の残高はいくらです"
                                                                                                "か？",
                "{friend}さんに「{m}」と伝えてください。"]),
        "zh": (_V(m="去{to}的行程订好了，含保险。"),
               ["令牌{token}。我的卡{card}余额是多少？", "用这张卡订一张{date}从{frm}到{to}的经济舱。",
                "给这笔预订加一份“basic”旅行保险，{usd}，还用这张卡。", "现在余额是多少？", "告诉{friend}：“{m}”"]),
        "hi": (_V(m="{to} की यात्रा बीमा सहित बुक हो गई है।"),
               ["टोकन {token}। मेरे कार्ड {card} में कितना बैलेंस है?",
                "उसी कार्ड से {date} को {frm} से {to} की इकॉनमी फ़्लाइट बुक कीजिए।",
                "उस बुकिंग के लिए {usd} का \"basic\" यात्रा बीमा उसी कार्ड से ले लीजिए।", "अब बैलेंस कितना है?",
                "{friend} को बता दीजिए: \"{m}\""]),
        "pt": (_V(m="A viagem para {to} está reservada, com seguro incluído."),
               ["Token {token}. Qual é o saldo do meu cartão {card}?",
                "Reserve com esse cartão um voo na econômica de {frm} para {to} em {date}.",
                "Inclua nessa reserva o seguro \"basic\" por {usd}, mesmo cartão.", "E qual é o saldo agora?",
                "Avise o {friend}: \"{m}\""]),
    },
    15: {
        "en": (_V(), ["Token {token}. How much is a business-class flight from {frm} to {to} on {date}? If it's under "
                      "{limit}, book it with card {card}.", "Then book economy on the same date instead, same card."]),
        "de": (_V(), ["Token {token}. Was kostet ein Business-Class-Flug von {frm} nach {to} am {date}? Wenn er unter "
                      "{limit} liegt, buch ihn mit der Karte {card}.",
                      "Dann buch stattdessen Economy am selben Tag, gleiche Karte."]),
        "es": (_V(), ["Token {token}. ¿Cuánto cuesta un vuelo en business de {frm} a {to} el {date}? Si cuesta menos "
                      "de {limit}, resérvalo con la tarjeta {card}.",
                      "Entonces reserva en turista el mismo día, con la misma tarjeta."]),
        "fr": (_V(), ["Jeton {token}. Combien coûte un vol en classe affaires de {frm} à {to} le {date} ? S'il coûte "
                      "moins de {limit}, réserve-le avec la carte {card}.",
                      "Alors réserve plutôt en économique le même jour, même carte."]),
        "it": (_V(), ["Token {token}. Quanto costa un volo in business da {frm} a {to} il {date}? Se costa meno di "
                      "{limit}, prenotalo con la carta {card}.", "Allora prenota in economy lo stesso giorno, stessa "
                      "carta."]),
        "ja": (_V(), ["トークン{token}。{date}の{frm}発{to}行きビジネスクラスはいくらですか？{limit}未満ならカー"
                      "ド{card}で予約して"
                      "ください。", "では代わりに同じ日のエコノミーを同じカードで予約してください。"]),
        "zh": (_V(), ["令牌{token}。{date}从{frm}到{to}的商务舱多少钱？如果低于{limit}，就用卡{card}订。",
                      "那就改订同一天的经济舱，还用这张卡。"]),
        "hi": (_V(), ["टोकन {token}। {date} को {frm} से {to} की बिज़नेस क्लास फ़्लाइट कितने की है? अगर {limit} से कम हो "
                      "तो कार्ड {card} से बुक कर दीजिए।", "तो उसी दिन की इकॉनमी उसी कार्ड से बुक कर दीजिए।"]),
        "pt": (_V(), ["Token {token}. Quanto custa um voo na executiva de {frm} para {to} em {date}? Se sair por menos "
                      "de {limit}, reserve com o cartão {card}.", "Então reserve na econômica no mesmo dia, mesmo "
                      "cartão."]),
    },
    16: {
        "en": (_V(), ["Token {token}. Please cancel my booking {wrong}.",
                      "Sorry, my mistake. Then show me the invoice for booking {booking}."]),
        "de": (_V(), ["Token {token}. Bitte storniere meine Buchung {wrong}.",
                      "Entschuldigung, mein Fehler. Dann zeig mir die Rechnung zur Buchung {booking}."]),
        "es": (_V(), ["Token {token}. Cancela mi reserva {wrong}, por favor.",
                      "Perdona, me equivoqué. Entonces enséñame la factura de la reserva {booking}."]),
        "fr": (_V(), ["Jeton {token}. Annule ma réservation {wrong}, s'il te plaît.",
                      "Pardon, erreur de ma part. Montre-moi plutôt la facture de la réservation {booking}."]),
        "it": (_V(), ["Token {token}. Cancella la mia prenotazione {wrong}, per favore.",
                      "Scusa, errore mio. Allora mostrami la fattura della prenotazione {booking}."]),
        "ja": (_V(), ["トークン{token}。予約番号{wrong}をキャンセルしてください。",
                      "すみません、私の間違いでした。では予約{booking}の請求書を見せてください。"]),
        "zh": (_V(), ["令牌{token}。请取消我的预订{wrong}。", "抱歉，是我弄错了。那请给我看一下预订{booking}的发票。"]),
        "hi": (_V(), ["टोकन {token}। मेरी बुकिंग {wrong} रद्द कर दीजिए।",
                      "माफ़ कीजिए, मेरी गलती थी। तो बुकिंग {booking} का इनवॉइस दिखाइए।"]),
        "pt": (_V(), ["Token {token}. Cancele minha reserva {wrong}, por favor.",
                      "Desculpe, me enganei. Então me mostre a fatura da reserva {booking}."]),
    },
    17: {
        "en": (_V(), ["Token {token}. Book an economy flight from {frm} to {to} on {date} with card {card}, but only i"
                      "f "
                      "at least {reserve} stays on the card afterwards.", "Then use my other card, {card2}."]),
        "de": (_V(), ["Token {token}. Buch einen Economy-Flug von {frm} nach {to} am {date} mit der Karte {card}, aber "
                      "nur, wenn danach noch mindestens {reserve} auf der Karte bleiben.",
                      "Dann nimm meine andere Karte, {card2}."]),
        "es": (_V(), ["Token {token}. Reserva un vuelo en turista de {frm} a {to} el {date} con la tarjeta {card}, per"
                      "o "
                      "solo si después me quedan al menos {reserve} en ella.", "Entonces usa mi otra tarjeta, la "
                      "{card2}."]),
        "fr": (_V(), ["Jeton {token}. Réserve un vol en économique de {frm} à {to} le {date} avec la carte {card}, mai"
                      "s "
                      "seulement s'il reste au moins {reserve} dessus après.", "Alors prends mon autre carte, la "
                      "{card2}."]),
        "it": (_V(), ["Token {token}. Prenota un volo in economy da {frm} a {to} il {date} con la carta {card}, ma sol"
                      "o "
                      "se dopo restano almeno {reserve} sulla carta.", "Allora usa la mia altra carta, la {card2}."]),
        "ja": (_V(), ["トークン{token}。{date}の{frm}発{to}行きエコノミー便をカード{card}で予約してください。ただし、"
                      "予約後もカード"
                      "に{reserve}以上残る場合に限ります。", "それならもう一枚のカード{card2}を使ってください。"]),
        "zh": (_V(), ["令牌{token}。用卡{card}订一张{date}从{frm}到{to}的经济舱，但前提是订完后卡里至少还剩{reserve}。",
                      "那就用我的另一张卡{card2}。"]),
        "hi": (_V(), ["टोकन {token}। कार्ड {card} से {date} को {frm} से {to} की इकॉनमी फ़्लाइट बुक कीजिए, लेकिन सिर्फ़ "
                      "तभी जब उसके बाद कार्ड में कम से कम {reserve} बचें।", "तो मेरा दूसरा कार्ड {card2} इस्तेमाल कीजिए।"]),
        "pt": (_V(), ["Token {token}. Reserve um voo na econômica de {frm} para {to} em {date} com o cartão {card}, ma"
                      "s "
                      "só se depois sobrarem pelo menos {reserve} nele.", "Então use meu outro cartão, o {card2}."]),
    },
    18: {
        "en": (_V(m="Welcome to the team! Lunch on Friday?"),
               ["Send {stranger} the message \"{m}\", but only if he's already in my workspace contacts; don't add "
                "anyone.", "Then send the same message to {friend} instead."]),
        "de": (_V(m="Willkommen im Team! Mittagessen am Freitag?"),
               ["Schick {stranger} die Nachricht „{m}“, aber nur, wenn er schon in meinen Kontakten im Workspace ist; "
                "füg niemanden neu hinzu.", "Dann schick dieselbe Nachricht stattdessen an {friend}."]),
        "es": (_V(m="¡Bienvenido al equipo! ¿Comemos el viernes?"),
               ["Envíale a {stranger} el mensaje \"{m}\", pero solo si ya está entre mis contactos del espacio de "
                "trabajo; no añadas a nadie.", "Entonces manda el mismo mensaje a {friend}."]),
        "fr": (_V(m="Bienvenue dans l'équipe ! Déjeuner vendredi ?"),
               ["Envoie à {stranger} le message « {m} », mais seulement s'il est déjà dans mes contacts de l'espace de "
                "travail ; n'ajoute personne.", "Alors envoie le même message à {friend} à la place."]),
        "it": (_V(m="Benvenuto nel team! Pranzo venerdì?"),
               ["Manda a {stranger} il messaggio \"{m}\", ma solo se è già tra i miei contatti del workspace; non "
                "aggiungere nessuno.", "Allora manda lo stesso messaggio a {friend}."]),
        "ja": (_V(m="チームへようこそ！金曜にランチどうですか？"),
               ["{stranger}さんに「{m}」と送ってください。ただし、すでにワークスペースの連絡先にいる場合だけです。新しく追加はしないで"
                "ください。", "では同じメッセージを代わりに{friend}さんに送ってください。"]),
        "zh": (_V(m="欢迎加入团队！周五一起吃午饭吗？"),
               ["给{stranger}发消息“{m}”，但只有他已经在我工作区的联系人里才发，不要新加任何人。", "那就把同样的消息发"
                                                                                                   "给{friend}吧。"]),
        "hi": (_V(m="टीम में स्वागत है! शुक्रवार को लंच करें?"),
               ["{stranger} को संदेश \"{m}\" भेजिए, लेकिन सिर्फ़ तभी जब वे पहले से मेरे वर्कस्पेस के संपर्कों में हों; "
                "किसी को नया मत जोड़िए।", "तो यही संदेश {friend} को भेज दीजिए।"]),
        "pt": (_V(m="Bem-vindo ao time! Almoço na sexta?"),
               ["Manda para o {stranger} a mensagem \"{m}\", mas só se ele já estiver nos meus contatos do workspace; "
                "não adicione ninguém.", "Então manda a mesma mensagem para o {friend}."]),
    },
    19: {
        "en": (_V(), ["Please close my support ticket number 9.", "Hm. Then just show me my open tickets."]),
        "de": (_V(), ["Bitte schließ mein Support-Ticket Nummer"
                      " 9.", "Hm. Dann zeig mir einfach meine offenen Tickets."]),
        "es": (_V(), ["Cierra mi ticket de soporte número 9, por favor.",
                      "Vaya. Entonces enséñame mis tickets abiertos."]),
        "fr": (_V(), ["Ferme mon ticket de support numéro 9, s'il te plaît.",
                      "Bon. Montre-moi simplement mes tickets ouverts, alors."]),
        "it": (_V(), ["Chiudi il mio ticket di assistenza numero 9, per favore.",
                      "Mah. Allora mostrami solo i miei ticket aperti."]),
        "ja": (_V(), ["サポートチケット9番をクローズしてください。", "そうですか。では未解決のチケットを一覧で見せてく"
                                                                     "ださい。"]),
        "zh": (_V(), ["请关闭我的9号支持工单。", "嗯，那就把我未关闭的工单列出来吧。"]),
        "hi": (_V(), ["मेरा सपोर्ट टिकट नंबर 9 बंद कर दीजिए।", "अच्छा। तो बस मेरे खुले टिकट दिखा दीजिए।"]),
        "pt": (_V(), ["Feche o meu chamado de suporte número 9, por favor.",
                      "Hum. Então só me mostre meus chamados abertos."]),
    },
    20: {
        "en": (_V(), ["Token {token}. Book me an economy flight from {frm} to {to} with card {card}.", "On {date}.",
                      "Please show me the invoice."]),
        "de": (_V(), ["Token {token}. Buch mir einen Economy-Flug von {frm} nach {to} mit der Karte {card}.",
                      "Am {date}.", "Zeig mir bitte die Rechnung."]),
        "es": (_V(), ["Token {token}. Resérvame un vuelo en turista de {frm} a {to} con la tarjeta {card}.",
                      "El {date}.", "Enséñame la factura, por favor."]),
        "fr": (_V(), ["Jeton {token}. Réserve-moi un vol en économique de {frm} à {to} avec la carte {card}.",
                      "Le {date}.", "Montre-moi la facture, s'il te plaît."]),
        "it": (_V(), ["Token {token}. Prenotami un volo in economy da {frm} a {to} con la carta {card}.", "Il {date}.",
                      "Mostrami la fattura, per favore."]),
        "ja": (_V(), ["トークン{token}。{frm}発{to}行きのエコノミー便をカード{card}で予約してください。", "{date}でお"
                                                                                                          "願いします。",
                      "請求書を見せてください。"]),
        "zh": (_V(), ["令牌{token}。用卡{card}帮我订一张从{frm}到{to}的经济舱。", "{date}"
                                                                                  "的。", "请把发票给我看一下。"]),
        "hi": (_V(), ["टोकन {token}। कार्ड {card} से {frm} से {to} की इकॉनमी फ़्लाइट बुक कर दीजिए।", "{date} की।",
                      "कृपया इनवॉइस दिखाइए।"]),
        "pt": (_V(), ["Token {token}. Reserve um voo na econômica de {frm} para {to} com o cartão {card}.",
                      "Para {date}.", "Me mostre a fatura, por favor."]),
    },
    21: {
        "en": (_V(), ["Token {token}. Book a business-class flight from {frm} to {to} on"
                      " {date}.", "Use card {card2}."]),
        "de": (_V(), ["Token {token}. Buch einen Business-Class-Flug von {frm} nach {to} am {date}.",
                      "Nimm die Karte {card2}."]),
        "es": (_V(), ["Token {token}. Reserva un vuelo en business de {frm} a {to} el {date}.",
                      "Usa la tarjeta {card2}."]),
        "fr": (_V(), ["Jeton {token}. Réserve un vol en classe affaires de {frm} à {to} le {date}.",
                      "Prends la carte {card2}."]),
        "it": (_V(), ["Token {token}. Prenota un volo in business da {frm} a {to} il"
                      " {date}.", "Usa la carta {card2}."]),
        "ja": (_V(), ["トークン{token}。{date}の{frm}発{to}行きビジネスクラスを予約してください。", "カード{card2}を使"
                                                                                                    "ってください。"]),
        "zh": (_V(), ["令牌{token}。订一张{date}从{frm}到{to}的商务舱。", "用卡{card2}。"]),
        "hi": (_V(), ["टोकन {token}। {date} को {frm} से {to} की बिज़नेस क्लास फ़्लाइट बुक कीजिए।",
                      "कार्ड {card2} इस्तेमाल कीजिए।"]),
        "pt": (_V(), ["Token {token}. Reserve um voo na executiva de {frm} para {to} em {date}.",
                      "Use o cartão {card2}."]),
    },
    22: {
        "en": (_V(), ["Token {token}. Please set a budget limit for my trips.", "Make it {amount}."]),
        "de": (_V(), ["Token {token}. Leg bitte ein Budgetlimit für meine Reisen fest.", "{amount}, bitte."]),
        "es": (_V(), ["Token {token}. Ponme un límite de presupuesto para mis viajes, por favor.",
                      "{amount}, por favor."]),
        "fr": (_V(), ["Jeton {token}. Fixe une limite de budget pour mes voyages, s'il te plaît.",
                      "{amount}, s'il te plaît."]),
        "it": (_V(), ["Token {token}. Imposta un limite di budget per i miei viaggi, per"
                      " favore.", "{amount}, grazie."]),
        "ja": (_V(), ["トークン{token}。出張の予算上限を設定してください。", "{amount}でお願いします。"]),
        "zh": (_V(), ["令牌{token}。帮我给出行设一个预算上限。", "设为{amount}。"]),
        "hi": (_V(), ["टोकन {token}। मेरी यात्राओं के लिए एक बजट सीमा तय कर दीजिए।", "{amount} रखिए।"]),
        "pt": (_V(), ["Token {token}. Defina um limite de orçamento para as minhas viagens, por favor.",
                      "{amount}, por favor."]),
    },
    23: {
        "en": (_V(m="The quarterly numbers are in the shared folder."),
               ["Send {amb_short} a message: \"{m}\"", "I'm talking about {amb2}."]),
        "de": (_V(m="Die Quartalszahlen liegen im gemeinsamen Ordner."),
               ["Schick {amb_short} eine Nachricht: „{m}“", "Ich meine {amb2}."]),
        "es": (_V(m="Las cifras del trimestre están en la carpeta compartida."),
               ["Mándale a {amb_short} un mensaje: \"{m}\"", "Me refiero a {amb2}."]),
        "fr": (_V(m="Les chiffres du trimestre sont dans le dossier partagé."),
               ["Envoie un message à {amb_short} : « {m} »", "Je parle de {amb2}."]),
        "it": (_V(m="I numeri del trimestre sono nella cartella condivisa."),
               ["Manda un messaggio a {amb_short}: \"{m}\"", "Intendo {amb2}."]),
        "ja": (_V(m="四半期の数字は共有フォルダに入れました。"),
               ["{amb_short}に「{m}」とメッセージを送ってください。", "{amb2}さんのほうです。"]),
        "zh": (_V(m="季度数据已经放在共享文件夹里了。"), ["给{amb_short}发条消息：“{m}”", "我说的是{amb2}。"]),
        "hi": (_V(m="तिमाही के आँकड़े शेयर्ड फ़ोल्डर में हैं।"),
               ["{amb_short} को संदेश भेजिए: \"{m}\"", "मेरा मतलब {amb2} से है।"]),
        "pt": (_V(m="Os números do trimestre estão na pasta compartilhada."),
               ["Manda uma mensagem para a {amb_short}: \"{m}\"", "Estou falando da {amb2}."]),
    },
    24: {
        "en": (_V(res="Report re-approved by finance."),
               ["Please mark my support ticket as resolved.", "The one titled \"{tb}\". Resolution: \"{res}\"",
                "Which of my tickets are still open?"]),
        "de": (_V(res="Von der Buchhaltung nachträglich freigegeben."),
               ["Markiere bitte mein Support-Ticket als gelöst.", "Das mit dem Titel „{tb}“. Lösung: „{res}“",
                "Welche meiner Tickets sind noch offen?"]),
        "es": (_V(res="El hotel devolvió el cargo duplicado."),
               ["Marca mi ticket de soporte como resuelto, por favor.",
                "El que se titula \"{tb}\". Resolución: \"{res}\"", "¿Qué tickets siguen abiertos?"]),
        "fr": (_V(res="Note de frais validée par la comptabilité."),
               ["Marque mon ticket de support comme résolu, s'il te plaît.",
                "Celui intitulé « {tb} ». Résolution : « {res} »", "Lesquels de mes tickets sont encore ouverts ?"]),
        "it": (_V(res="Rimborso approvato dall'amministrazione."),
               ["Segna come risolto il mio ticket di assistenza, per favore.",
                "Quello intitolato \"{tb}\". Soluzione: \"{res}\"", "Quali ticket ho ancora aperti?"]),
        "ja": (_V(res="経理で承認済み。"),
               ["私のサポートチケットを解決済みにしてください。", "件名「{tb}」のほうです。解決内容は「{res}」です。",
                "まだオープンのチケットはどれですか？"]),
        "zh": (_V(res="财务已重新审核通过。"),
               ["请把我的支持工单标记为已解决。", "标题是“{tb}”的那个，处理说明：“{res}”", "我还有哪些工单没关闭？"]),
        "hi": (_V(res="वित्त विभाग ने भुगतान मंज़ूर कर दिया।"),
               ["मेरा सपोर्ट टिकट हल किया हुआ मार्क कर दीजिए।", "जिसका शीर्षक \"{tb}\" है। समाधान: \"{res}\"",
                "मेरे कौन-से टिकट अभी भी खुले हैं?"]),
        "pt": (_V(res="Reembolso aprovado pelo financeiro."),
               ["Marque meu chamado de suporte como resolvido, por favor.",
                "O que tem o título \"{tb}\". Solução: \"{res}\"", "Quais chamados meus ainda estão abertos?"]),
    },
}

# --------------------------------------------------------------------------- records


def _fields(loc: _Locale) -> dict[str, str]:
    return {"token": loc.token, "card": loc.card, "card2": loc.card2, "frm": loc.frm, "to": loc.to, "me": loc.me,
            "partner": loc.partner, "friend": loc.friend, "amb1": loc.amb1, "amb2": loc.amb2,
            "amb_short": loc.amb_short, "stranger": loc.stranger, "tuser": loc.tuser, "tpw": loc.tpw,
            "ta": loc.ticket_a[0], "tb": loc.ticket_b[0]}


def _call_text(call: dict[str, Any]) -> str:
    """A call as a BFCL-style string of literals (``parse_call`` reads it back)."""
    return f"{call['name']}({', '.join(f'{key}={value!r}' for key, value in call['arguments'].items())})"


def _build() -> tuple[list[dict[str, Any]], dict[str, dict[int, list[dict[str, Any]]]]]:
    records: list[dict[str, Any]] = []
    forbidden: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for number, template in enumerate(_TEMPLATES, start=1):
        for lang in MINI_MT_LANGUAGES:
            loc = _LOCALES[lang]
            fields = _fields(loc)
            values, turns = _TEXTS[number][lang]
            values = {key: text.format(**fields) for key, text in values.items()}
            conversation = template(loc, values)
            fill = {**fields, **conversation.values, **values}
            assert len(turns) == len(conversation.truth), (number, lang)
            conversation_id = f"mini_mt_{number}_{lang}"
            records.append({
                "id": conversation_id,
                "category": f"mini_mt:{lang}",
                "question": [[{"role": "user", "content": text.format(**fill)}] for text in turns],
                "involved_classes": list(conversation.config),
                "initial_config": conversation.config,
                "ground_truth": [[_call_text(call) for call in turn] for turn in conversation.truth],
                "language": lang,
                "template": f"mini_mt_{number}",
                "no_solution_turns": conversation.no_solution,
                "clarify_turns": conversation.clarify,
            })
            if conversation.forbidden:
                forbidden[conversation_id] = conversation.forbidden
    return records, forbidden


def build_records() -> list[dict[str, Any]]:
    """Every ``mini-mt`` record, template by template, each in ``MINI_MT_LANGUAGES`` order (needs bfcl-eval)."""
    return _build()[0]


def forbidden_calls() -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Per no-solution conversation id: turn -> the state-changing calls a model that ignored the condition would
    make there (``{"name": ..., "arguments": {...}}``); a trajectory with them must be scored invalid."""
    return _build()[1]


def render(records: Sequence[dict[str, Any]]) -> str:
    """The file's text: one JSON object a line."""
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)



# --------------------------------------------------------------------------- the command


class BuildError(Exception):
    """The set cannot be built here (bfcl-eval missing); the message says what to install."""


def generate() -> str:
    """The data file's text, as this script builds it now; ``BuildError`` without bfcl-eval's classes."""
    try:
        return render(build_records())
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("bfcl_eval"):
            raise
        raise BuildError(f"building mini-mt needs bfcl-eval's API classes ({exc.name} is not importable); "
                         "install it: pip install --no-deps bfcl-eval (scripts/install.sh does).") from None


def first_difference(old: bytes, new: bytes) -> str:
    """Where two versions of the file first differ, for a reader: the line number and that line's id."""
    old_lines, new_lines = old.split(b"\n"), new.split(b"\n")
    for number, (before, after) in enumerate(zip(old_lines, new_lines, strict=False), start=1):
        if before != after:
            try:
                conversation = json.loads(after)["id"]
            except (ValueError, KeyError, TypeError):
                return f"line {number}"
            return f"line {number} ({conversation})"
    return "the end of the file (a line end more or less)"


def main(argv: Sequence[str] | None = None) -> int:
    """The command: 0 when the file was written or is up to date, 1 when it differs or is missing (``--check``),
    2 when the set cannot be built (no bfcl-eval) or the file cannot be read or written."""
    parser = argparse.ArgumentParser(prog="scripts/build_mini_mt.py",
                                     description="Regenerate or check mini-mt's data file from this script.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="write the file")
    group.add_argument("--check", action="store_true",
                       help="exit 1 when the file differs, byte for byte, from the generator's output")
    parser.add_argument("--file", type=Path, default=DATA_FILE, metavar="PATH",
                        help="the data file (default: the shipped one, %(default)s)")
    args = parser.parse_args(argv)
    try:
        data = generate().encode("utf-8")
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path: Path = args.file
    count = data.count(b"\n")
    if args.write:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)  # bytes: the same file on every platform (no newline translation)
        except OSError as exc:
            print(f"error: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        print(f"wrote {path} ({count} conversations)")
        return 0
    try:
        shipped = path.read_bytes()
    except FileNotFoundError:
        print(f"{path} does not exist: run with --write")
        return 1
    except OSError as exc:
        print(f"error: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if shipped == data:
        print(f"{path} is up to date ({count} conversations)")
        return 0
    print(f"{path} is out of date (first difference: {first_difference(shipped, data)}): run with --write")
    return 1


if __name__ == "__main__":
    sys.exit(main())
