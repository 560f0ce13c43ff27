"""The shop's catalogue: products with a category, a type, attributes, options and a price.

A seeded generator (:func:`generate_catalog`) builds it; the package ships its output as
``data/catalog.json.gz`` (``python -m agentgym.envs.web.shop.catalog`` rewrites the file, and a
test checks that regenerating gives the same products), and :func:`load_catalog` reads it.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = [
    "CATALOG_PATH",
    "CATEGORIES",
    "Category",
    "Product",
    "generate_catalog",
    "load_catalog",
]

CATALOG_PATH = Path(__file__).with_name("data") / "catalog.json.gz"
SEED = 28
PER_CATEGORY = 110
SIZES = ("XS", "S", "M", "L", "XL", "XXL")
SHOE_SIZES = tuple(str(n) for n in range(6, 13))
COLOURS = (
    "black", "navy", "grey", "red", "green", "blue", "olive", "white", "orange", "purple",
)  # fmt: skip


@dataclass(frozen=True)
class Category:
    """A department: its product types, the attributes its products may have, and the options
    (name -> possible values) they are sold in."""

    name: str
    types: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]


CATEGORIES: tuple[Category, ...] = (
    Category(
        "jackets",
        ("rain jacket", "down jacket", "fleece jacket", "softshell jacket", "hiking jacket"),
        ("waterproof", "lightweight", "packable", "insulated", "breathable", "windproof",
         "recycled materials", "hooded", "for women", "for men"),
        {"size": SIZES, "colour": COLOURS},
        (39.0, 260.0),
    ),
    Category(
        "shoes",
        ("trail running shoes", "hiking boots", "walking shoes", "sandals", "road running shoes"),
        ("waterproof", "lightweight", "vegan", "wide fit", "slip resistant", "breathable",
         "cushioned", "for women", "for men", "recycled materials"),
        {"size": SHOE_SIZES, "colour": COLOURS},
        (29.0, 210.0),
    ),
    Category(
        "backpacks",
        ("daypack", "hiking backpack", "laptop backpack", "travel backpack", "hydration pack"),
        ("waterproof", "lightweight", "padded laptop sleeve", "anti theft", "recycled materials",
         "rain cover included", "ventilated back", "carry on size"),
        {"capacity": ("15 L", "20 L", "25 L", "30 L", "40 L", "50 L"), "colour": COLOURS},
        (19.0, 240.0),
    ),
    Category(
        "tents",
        ("dome tent", "tunnel tent", "backpacking tent", "family tent", "pop up tent"),
        ("waterproof", "lightweight", "freestanding", "easy setup", "blackout", "four season",
         "mesh ventilation", "footprint included"),
        {"capacity": ("1 person", "2 person", "3 person", "4 person", "6 person")},
        (49.0, 600.0),
    ),
    Category(
        "shirts",
        ("t-shirt", "polo shirt", "flannel shirt", "linen shirt", "base layer shirt"),
        ("organic cotton", "moisture wicking", "quick dry", "long sleeve", "short sleeve",
         "wrinkle free", "slim fit", "for women", "for men", "uv protection"),
        {"size": SIZES, "colour": COLOURS},
        (9.0, 90.0),
    ),
    Category(
        "headphones",
        ("over ear headphones", "wireless earbuds", "on ear headphones", "sports earbuds",
         "gaming headset"),
        ("noise cancelling", "wireless", "bluetooth", "foldable", "long battery life",
         "built in microphone", "sweat resistant", "fast charging"),
        {"colour": ("black", "white", "silver", "blue", "red", "rose gold")},
        (15.0, 400.0),
    ),
    Category(
        "mugs",
        ("coffee mug", "travel mug", "tea cup", "camping mug", "espresso cup"),
        ("dishwasher safe", "microwave safe", "insulated", "leak proof", "ceramic",
         "stainless steel", "bpa free", "handmade"),
        {"capacity": ("8 oz", "12 oz", "16 oz", "20 oz"), "colour": COLOURS},
        (6.0, 45.0),
    ),
    Category(
        "sleeping bags",
        ("mummy sleeping bag", "rectangular sleeping bag", "double sleeping bag",
         "kids sleeping bag", "summer sleeping bag"),
        ("lightweight", "compressible", "down filled", "synthetic fill", "water resistant",
         "machine washable", "three season", "zip together"),
        {"temperature rating": ("-10 C", "-5 C", "0 C", "5 C", "10 C"), "colour": COLOURS},
        (25.0, 420.0),
    ),
    Category(
        "water bottles",
        ("insulated bottle", "sports bottle", "filter bottle", "collapsible bottle",
         "glass bottle"),
        ("bpa free", "leak proof", "dishwasher safe", "stainless steel", "insulated",
         "lightweight", "wide mouth", "straw lid"),
        {"capacity": ("500 ml", "750 ml", "1 l", "1.5 l"), "colour": COLOURS},
        (8.0, 60.0),
    ),
    Category(
        "watches",
        ("smartwatch", "fitness tracker", "gps watch", "dive watch", "analog watch"),
        ("waterproof", "heart rate monitor", "gps", "long battery life", "sleep tracking",
         "solar charging", "scratch resistant", "lightweight"),
        {"band colour": ("black", "white", "blue", "green", "red", "grey"),
         "case size": ("38 mm", "42 mm", "46 mm")},
        (25.0, 700.0),
    ),
)  # fmt: skip

_BRANDS = (
    "Northpeak", "Alder & Co", "Trailhead", "Kestrel", "Summitline", "Bluefjord", "Marlow",
    "Ridgeway", "Cinder", "Halvard", "Wren", "Orbitek", "Pinecrest", "Solace", "Vantage",
    "Everfield", "Tundra Works", "Lumen", "Harbor", "Quill",
)  # fmt: skip
_NOUNS = ("Classic", "Pro", "Lite", "Explorer", "Voyager", "Edge", "Trek", "Nova", "Core", "Apex")
_FEATURES = (
    "Made to last, with reinforced seams and a two year warranty.",
    "A customer favourite for everyday use.",
    "Designed and tested in the mountains.",
    "Ships in plastic free packaging.",
    "Simple care: wipe clean or follow the label.",
    "Thoughtful details without extra weight.",
)


@dataclass(frozen=True)
class Product:
    """One product. ``options`` maps an option name to the values it is sold in (empty for a
    product sold in one variant)."""

    id: str
    title: str
    category: str
    product_type: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: float
    rating: float
    reviews: int
    description: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "title": self.title, "category": self.category,
            "product_type": self.product_type, "attributes": list(self.attributes),
            "options": {k: list(v) for k, v in self.options.items()}, "price": self.price,
            "rating": self.rating, "reviews": self.reviews, "description": self.description,
        }  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Product:
        options = {k: tuple(v) for k, v in raw["options"].items()}
        fields = {**raw, "attributes": tuple(raw["attributes"]), "options": options}
        return cls(**fields)


_UPPER = {"uv": "UV", "bpa": "BPA", "gps": "GPS", "t-shirt": "T-Shirt"}


def _cap(phrase: str) -> str:
    return " ".join(_UPPER.get(w, w.capitalize()) for w in phrase.split())


def _title(rng: random.Random, brand: str, ptype: str, attributes: list[str]) -> str:
    shown = [a for a in attributes if not a.startswith("for ")][:2]
    audience = [a for a in attributes if a.startswith("for ")]
    words = [brand, rng.choice(_NOUNS), *(_cap(a) for a in shown), _cap(ptype)]
    return " ".join(words) + (f" {_cap(audience[0])}" if audience else "")


def _product(rng: random.Random, index: int, category: Category) -> Product:
    ptype = rng.choice(category.types)
    pool = [a for a in category.attributes if not a.startswith("for ")]
    attributes = rng.sample(pool, rng.randint(2, 4))
    if any(a.startswith("for ") for a in category.attributes) and rng.random() < 0.7:
        attributes.append(rng.choice(("for women", "for men")))
    options = {}
    for name, values in category.options.items():
        k = rng.randint(min(2, len(values)), len(values))
        chosen = set(rng.sample(values, k))
        options[name] = tuple(v for v in values if v in chosen)
    low, high = category.price
    price = round(rng.uniform(low, high)) - 0.01
    brand = rng.choice(_BRANDS)
    title = _title(rng, brand, ptype, attributes)
    features = [a for a in attributes if not a.startswith("for ")]
    audience = "".join(f" {a}" for a in attributes if a.startswith("for "))
    description = (
        f"A {', '.join(features[:-1])} and {features[-1]} {ptype}{audience} by {brand}."
        f" {rng.choice(_FEATURES)}"
    )
    return Product(
        id=f"P{index:04d}",
        title=title,
        category=category.name,
        product_type=ptype,
        attributes=tuple(sorted(attributes)),
        options=options,
        price=round(price, 2),
        rating=round(rng.uniform(2.5, 5.0), 1),
        reviews=rng.randint(0, 2500),
        description=description,
    )


def generate_catalog(seed: int = SEED, per_category: int = PER_CATEGORY) -> tuple[Product, ...]:
    """The catalogue for ``seed``: ``per_category`` products in each of :data:`CATEGORIES`."""
    rng = random.Random(seed)
    products: list[Product] = []
    for category in CATEGORIES:
        for _ in range(per_category):
            products.append(_product(rng, len(products) + 1, category))
    return tuple(products)


def encode_catalog(products: tuple[Product, ...]) -> bytes:
    """The shipped file's bytes: gzip of compact JSON, with a fixed mtime."""
    text = json.dumps([p.to_json() for p in products], separators=(",", ":"), sort_keys=True)
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


@lru_cache(maxsize=1)
def load_catalog() -> tuple[Product, ...]:
    """The shipped catalogue (read once per process)."""
    raw = json.loads(gzip.decompress(CATALOG_PATH.read_bytes()))
    return tuple(Product.from_json(item) for item in raw)


if __name__ == "__main__":
    CATALOG_PATH.write_bytes(encode_catalog(generate_catalog()))
    print(f"wrote {CATALOG_PATH} ({CATALOG_PATH.stat().st_size} bytes)")
