"""The texts of generated questions: business rules and question wording, written for this project (the rules as
the PlanRAG paper states them; the wording close to DQA's so the sets read alike)."""

LOCATING_RULES = "\n".join((
    '',
    'Trade nodes hold a local value, an ingoing value from their source nodes, an outgoing value, a total'
    ' trading power and whether they are inland.',
    'A country has a name, a development and a home node; its presence on a node has a base trading '
    'power, and the total trading power of a node includes the power of every country present.',
    'A flow is a directed edge [source] from a node to a dest node, downstream towards the end nodes.',
    "A country earns its profit at its home node: (local_value + ingoing) * (country's trading power / "
    'total trading power) of that node.',
    'From any other node, value moves to the dest nodes in proportion to the trading power of the '
    'countries that do not have that node as home, times (local_value + ingoing); at the dest node the '
    'moved value is multiplied by 1.05 and added to its ingoing.',
    "A merchant of a country on a trading node adds 2 to the country's trading power there and multiplies"
    ' it by 1.05; on an inland node it adds 2 + max(development / 3, 50) instead. (optional)',
    'If a node has more than one dest node, a country that does not have the node as home and places a '
    'merchant there steers its share of the value towards its home node; without merchants, value splits '
    'among the dest nodes in proportion to the other outflows. With one dest node, steering does not '
    'matter.',
    '',
))
LOCATING_QUESTION = "\n".join((
    '',
    '================',
    '<Question>',
    '',
    'Assume that you are the ruler of the country named "{country}". You and your competitors trade on '
    'the network of {year}.',
    'You have one merchant to place on the trade network. Our home node is "{home}". Where should I place'
    ' my merchant to bring the most trade value to "{home}"?',
    '',
))
LOCATING_GOAL = 'My goal is maximizing my profit on "{home}".'
BUILDING_RULES = "\n".join((
    '',
    'Goods have a "name", a "code", a "base_price", a "current_price" and a "pop_demand".',
    'Buildings have a unique "id", a "name" (their type) and a "level".',
    'Supply is a relation from Buildings to Goods with "max_supply", "current_output" and "level" (the '
    "building's level); max_supply is proportional to the level.",
    'Demand is a relation from Goods to Buildings with "max_demand", "current_input" and "level"; '
    'max_demand is proportional to the level.',
    'The demand of Goods is its "pop_demand" plus the sum of "max_demand" over its Demands.',
    'The supply of Goods is the sum of "current_output" over its Supplies.',
    'The "current_input" of a Demand is its "max_demand" times the supply of the Goods divided by the '
    'demand of the Goods.',
    'The "current_output" of a Supply is its "max_supply" times the average over the Building\'s Demands '
    'of min(1, current_input / max_demand).',
    'The "current_price" of Goods is base_price * (1 + 0.75 * (demand - supply) / max(demand, supply)).',
))
BUILDING_QUESTION = ("Which building id should we increase a level by 5 to maximally decrease the market price of "
                     "{goods}?")
