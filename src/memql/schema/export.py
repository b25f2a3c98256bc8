"""Print the SDL: `python -m memql.schema.export > schema.graphql`."""

from memql.schema import schema

if __name__ == "__main__":
    print(schema.as_str())
